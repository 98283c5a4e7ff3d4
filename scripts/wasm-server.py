#!/usr/bin/env python3
# Serves the Ferry filter's .wasm over HTTPS, as Envoy Gateway's own server serves the
# modules it has pulled (envoy/envoy-gateway.yaml fetches it with vm_config.code.remote
# through its `wasm_cluster`): on 127.0.0.1:FERRY_WASM_HTTPS_PORT, TLS 1.3 with the dev
# server certificate, and, as EG's server, a client certificate signed by the dev CA
# required (Envoy presents envoy-client.pem). One path, /ferry_filter.wasm: the file
# FERRY_WASM as it is at each request. Every request is logged on stderr with the
# sha256 it served. scripts/stack.sh starts it for FERRY_ENVOY_SCENARIO=envoy-gateway
# (pid and log `wasm-server` under FERRY_RUN_DIR); by hand:
#   source scripts/env.sh && python3 scripts/wasm-server.py
import hashlib, http.server, os, ssl, sys

PATH = "/ferry_filter.wasm"


class Handler(http.server.BaseHTTPRequestHandler):
    server_version = "ferry-wasm-server"

    def _send(self, with_body):
        if self.path != PATH:
            self.send_error(404)
            return
        try:
            data = open(os.environ["FERRY_WASM"], "rb").read()
        except OSError as e:
            self.send_error(503, f"no module: {e}")
            return
        self.send_response(200)
        self.send_header("content-type", "application/wasm")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        if with_body:
            self.wfile.write(data)
        self.log_message("served %s: %d bytes, sha256 %s", self.path, len(data), hashlib.sha256(data).hexdigest())

    def do_GET(self):
        self._send(True)

    def do_HEAD(self):
        self._send(False)


def main():
    certs = os.path.join(os.environ["FERRY_RUN_DIR"], "certs")
    port = int(os.environ.get("FERRY_WASM_HTTPS_PORT", "8449"))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_cert_chain(os.path.join(certs, "server.pem"), os.path.join(certs, "server.key"))
    ctx.load_verify_locations(os.path.join(certs, "ca.pem"))
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.set_alpn_protocols(["http/1.1"])
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    print(f"wasm-server: https://127.0.0.1:{port}{PATH} -> {os.environ['FERRY_WASM']}", file=sys.stderr, flush=True)
    httpd.serve_forever()


if __name__ == "__main__":
    main()
