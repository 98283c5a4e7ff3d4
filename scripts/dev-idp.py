#!/usr/bin/env python3
# A development identity provider for envoy/tokens.yaml (docs/guides/tokens.md): it
# makes signing keys, mints short-lived tokens (JWT, ES256) and serves a JWKS over
# HTTPS, as an identity provider would. python3's standard library and the openssl CLI
# only. Never for production: there your identity provider (or your own signer, e.g.
# clients/js/ferry-token.js in an edge function) mints the tokens.
#
#   dev-idp.py keys DIR         two P-256 keys in DIR (mode 0700): file.pem for the JWKS
#                               Envoy reads from a file (jwks-file.json, kid file-1) and
#                               url.pem for the one it fetches (jwks-url.json, kid url-1);
#                               kept if present
#   dev-idp.py mint --key DIR/file.pem [--kid file-1] [--iss I] [--aud A]
#                   [--account app] [--sub S] [--ttl 300] [--claims JSON]
#                               prints a token (iss/aud default FERRY_TOKEN_ISSUER /
#                               FERRY_TOKEN_AUDIENCE as scripts/env.sh sets them)
#   dev-idp.py serve DIR        the JWKS at https://127.0.0.1:$FERRY_JWKS_HTTPS_PORT/jwks.json
#                               (DIR/jwks-url.json, read at each request), with the dev
#                               certificate ($FERRY_RUN_DIR/certs/server.pem)
import argparse, base64, http.server, json, os, ssl, subprocess, sys, time


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def openssl(*args, data=None):
    r = subprocess.run(["openssl", *args], input=data, capture_output=True)
    if r.returncode != 0:
        sys.exit(f"dev-idp.py: openssl {' '.join(args)}: {r.stderr.decode().strip()}")
    return r.stdout


def jwk(pem, kid):
    # The public key's DER ends with the uncompressed point: 0x04 || x || y.
    point = openssl("pkey", "-in", pem, "-pubout", "-outform", "DER")[-65:]
    return {"kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig", "kid": kid,
            "x": b64url(point[1:33]), "y": b64url(point[33:])}


def keys(d):
    os.makedirs(d, mode=0o700, exist_ok=True)
    for name, kid in (("file", "file-1"), ("url", "url-1")):
        pem = os.path.join(d, f"{name}.pem")
        if not os.path.exists(pem):
            old = os.umask(0o077)
            openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", pem)
            os.umask(old)
        with open(os.path.join(d, f"jwks-{name}.json"), "w") as f:
            json.dump({"keys": [jwk(pem, kid)]}, f)


def der_to_raw(sig):
    # ECDSA-Sig-Value ::= SEQUENCE { r INTEGER, s INTEGER }, as JWS wants it: r || s.
    def length(i):
        n = sig[i]
        if n < 0x80:
            return n, i + 1
        k = n & 0x7F
        return int.from_bytes(sig[i + 1:i + 1 + k], "big"), i + 1 + k
    _, i = length(1)
    out = b""
    for _ in range(2):
        n, i = length(i + 1)
        out += sig[i:i + n].lstrip(b"\0").rjust(32, b"\0")
        i += n
    return out


def mint(a):
    now = int(time.time())
    claims = {"iss": a.iss, "aud": a.aud, "iat": now, "exp": now + a.ttl, "sub": a.sub}
    if a.account:
        claims["ferry_account"] = a.account
    claims.update(json.loads(a.claims))
    head = b64url(json.dumps({"alg": "ES256", "typ": "JWT", "kid": a.kid}).encode())
    body = b64url(json.dumps(claims).encode())
    signed = f"{head}.{body}".encode()
    sig = openssl("dgst", "-sha256", "-sign", a.key, data=signed)
    print(f"{head}.{body}.{b64url(der_to_raw(sig))}")


def serve(d):
    path = os.path.join(d, "jwks-url.json")

    class Handler(http.server.BaseHTTPRequestHandler):
        server_version = "ferry-dev-idp"

        def do_GET(self):
            if self.path != "/jwks.json":
                self.send_error(404)
                return
            data = open(path, "rb").read()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    port = int(os.environ.get("FERRY_JWKS_HTTPS_PORT", "8450"))
    certs = os.path.join(os.environ.get("FERRY_RUN_DIR", ".run"), "certs")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(os.path.join(certs, "server.pem"), os.path.join(certs, "server.key"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    print(f"dev-idp: JWKS at https://127.0.0.1:{port}/jwks.json", file=sys.stderr, flush=True)
    server.serve_forever()


def main():
    p = argparse.ArgumentParser(prog="dev-idp.py")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("keys").add_argument("dir")
    sub.add_parser("serve").add_argument("dir")
    m = sub.add_parser("mint")
    m.add_argument("--key", required=True)
    m.add_argument("--kid", default="file-1")
    m.add_argument("--iss", default=os.environ.get("FERRY_TOKEN_ISSUER") or "https://idp.ferry.invalid/file")
    m.add_argument("--aud", default=os.environ.get("FERRY_TOKEN_AUDIENCE") or "ferry")
    m.add_argument("--account", default="app")
    m.add_argument("--sub", default="dev-user")
    m.add_argument("--ttl", type=int, default=300)
    m.add_argument("--claims", default="{}", help="extra claims, a JSON object")
    a = p.parse_args()
    {"keys": lambda: keys(a.dir), "serve": lambda: serve(a.dir), "mint": lambda: mint(a)}[a.cmd]()


if __name__ == "__main__":
    main()
