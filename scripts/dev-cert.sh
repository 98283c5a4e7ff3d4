#!/usr/bin/env bash
# Makes a local development CA and a server certificate for localhost/127.0.0.1/::1
# under $FERRY_RUN_DIR/certs (ca.pem, server.pem, server.key), Envoy's client
# certificate for a shim behind TLS (envoy-client.pem, .key), a TLS session
# ticket key (ticket.key) and the shim's session sealing key (session.keys). Idempotent: an
# existing, still valid certificate is kept. Clients trust ca.pem (e.g.
# NODE_EXTRA_CA_CERTS=.run/certs/ca.pem, curl --cacert .run/certs/ca.pem).
set -euo pipefail
dir="${FERRY_RUN_DIR:-.run}/certs"
mkdir -p "$dir"
cd "$dir"
# The TLS session ticket key shared by Envoy's workers (80 random bytes, see envoy/ferry.yaml).
[ -s ticket.key ] || (umask 077 && openssl rand 80 > ticket.key)
# The key that seals psdb sessions (docs/design/shim.md "Sessions, transactions and session state"):
# one hex key per line, the first signs.
[ -s session.keys ] || (umask 077 && openssl rand -hex 32 > session.keys)
# Envoy's client certificate for a shim that requires one (envoy/shim-tls.yaml,
# FERRY_SHIM_TLS_CLIENT_CA=ca.pem): envoy-client.pem / .key, signed by the dev CA.
client_cert() {
  [ -s envoy-client.pem ] && [ -s envoy-client.key ] && [ envoy-client.pem -nt ca.pem ] \
    && openssl x509 -checkend 86400 -noout -in envoy-client.pem >/dev/null 2>&1 && return
  (
    umask 077
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=ferry-envoy" \
      -keyout envoy-client.key -out envoy-client.csr 2>/dev/null
    printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n' > envoy-client.ext
    openssl x509 -req -in envoy-client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 825 \
      -extfile envoy-client.ext -out envoy-client.pem 2>/dev/null
    rm -f envoy-client.csr envoy-client.ext
  )
}
if [ -s server.pem ] && [ -s server.key ] && [ -s ca.pem ] \
   && openssl x509 -checkend 86400 -noout -in server.pem >/dev/null 2>&1; then
  [ ! -s ca.key ] || client_cert
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
client_cert
echo "dev certificate: $dir/server.pem (CA: $dir/ca.pem)"
