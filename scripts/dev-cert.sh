#!/usr/bin/env bash
# Makes a local development CA and a server certificate for localhost/127.0.0.1/::1
# under $FERRY_RUN_DIR/certs (ca.pem, server.pem, server.key), a TLS session
# ticket key (ticket.key) and the shim's session sealing key (session.keys). Idempotent: an
# existing, still valid certificate is kept. Clients trust ca.pem (e.g.
# NODE_EXTRA_CA_CERTS=.run/certs/ca.pem, curl --cacert .run/certs/ca.pem).
set -euo pipefail
dir="${FERRY_RUN_DIR:-.run}/certs"
mkdir -p "$dir"
cd "$dir"
# The TLS session ticket key shared by Envoy's workers (80 random bytes, see envoy/ferry.yaml).
[ -s ticket.key ] || (umask 077 && openssl rand 80 > ticket.key)
# The key that seals psdb sessions (shim/README.md): one hex key per line, the first signs.
[ -s session.keys ] || (umask 077 && openssl rand -hex 32 > session.keys)
if [ -s server.pem ] && [ -s server.key ] && [ -s ca.pem ] \
   && openssl x509 -checkend 86400 -noout -in server.pem >/dev/null 2>&1; then
  exit 0
fi
umask 077
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
  -subj "/CN=Ferry development CA" -keyout ca.key -out ca.pem \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=localhost" \
  -keyout server.key -out server.csr 2>/dev/null
cat > server.ext <<EXT
basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1${FERRY_CERT_EXTRA_SAN:+,$FERRY_CERT_EXTRA_SAN}
EXT
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 825 \
  -extfile server.ext -out server.pem 2>/dev/null
chmod 644 ca.pem server.pem
rm -f server.csr server.ext
echo "dev certificate: $dir/server.pem (CA: $dir/ca.pem)"
