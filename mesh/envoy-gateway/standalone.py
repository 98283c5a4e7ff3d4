#!/usr/bin/env python3
"""The manifests users apply (deploy/envoy-gateway/, read only) made runnable by Envoy
Gateway in standalone mode on this host, for scripts/test-mesh.sh.

    standalone.py --deploy deploy/envoy-gateway --list-hostnames
    standalone.py --deploy deploy/envoy-gateway --variant plain --out resources.yaml \\
        --envoy-version 1.40.0 --port 18460 --shim 127.0.0.1:18462 \\
        --image oci://127.0.0.1:18464/ferry/filter:mesh --image-sha256 HEX \\
        --http-url https://127.0.0.1:18463/ferry_filter.wasm --http-sha256 HEX \\
        --gateway-cert server.pem --gateway-key server.key --ca ca.pem \\
        --eg-certs .run/mesh/eg/config/certs

Reads base/*.yaml and <variant>/*.yaml and writes one multi-document file for the file
provider, changing only what a Kubernetes cluster would have supplied, and says so on
stderr, one line per change:
  - Kubernetes workloads (Deployment, Service, ...) are dropped: the shim runs on this host.
  - The EnvoyProxy the GatewayClass names gets `provider: {type: Host, host:
    {envoyVersion}}` (func-e then starts our Envoy, linked in by the script).
  - Gateway listener ports become --port (443 needs no privileges in the test's namespace,
    but a port of our own keeps the run recognisable).
  - Backends point at the shim on loopback (an IP endpoint: Host infrastructure only).
  - The wasm code source points at the loopback registry (Image) or HTTPS server (HTTP),
    with the sha256 of what is served there; an HTTPS source gets the dev CA.
  - Secrets the cluster operator would create: the Gateway's certificate(s), and the two
    Host-infrastructure workarounds (README.md): Envoy's client certificate `envoy` from
    `envoy-gateway certgen --local`, and an EnvoyPatchPolicy giving EG's `wasm_cluster`
    that CA instead of the pod path /certs/ca.crt.
Prints a JSON summary on stdout: hostnames (for /etc/hosts and the certificate), the
filter configuration, the namespace and the Gateway's listener names.
"""

import argparse
import base64
import copy
import glob
import json
import os
import sys

import yaml

CONTROLLER_NAMESPACE = "envoy-gateway-system"
# What the file provider loads (internal/gatewayapi/resource/load.go), minus Service:
# the manifests' Services select pods, which do not exist here.
SUPPORTED = {
    "EnvoyProxy", "GatewayClass", "Gateway", "TCPRoute", "UDPRoute", "TLSRoute", "HTTPRoute",
    "GRPCRoute", "Namespace", "EnvoyPatchPolicy", "ClientTrafficPolicy",
    "BackendTrafficPolicy", "SecurityPolicy", "HTTPRouteFilter", "Backend", "Secret",
    "ConfigMap", "BackendTLSPolicy", "EnvoyExtensionPolicy", "ReferenceGrant",
}


def note(msg):
    print(f"standalone: {msg}", file=sys.stderr)


def b64(path):
    with open(path, "rb") as f:
        return base64.b64encode(f.read()).decode()


def load(paths):
    docs = []
    for path in paths:
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                if isinstance(doc, dict) and doc.get("kind") and doc.get("apiVersion"):
                    docs.append((path, doc))
    return docs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--list-hostnames", action="store_true",
                    help="only print the hostnames of --deploy's Gateways and routes, one a line")
    ap.add_argument("--deploy", required=True)
    listing = "--list-hostnames" in sys.argv
    for a in ("variant", "out", "envoy-version", "shim", "image", "image-sha256",
              "http-url", "http-sha256", "gateway-cert", "gateway-key", "ca", "eg-certs"):
        ap.add_argument("--" + a, required=not listing)
    ap.add_argument("--port", type=int, required=not listing)
    ap.add_argument("--filter-config", help="JSON: replaces the manifests' filter configuration (experiments)")
    args = ap.parse_args()
    if args.list_hostnames:
        names = set()
        for _, doc in load(sorted(glob.glob(os.path.join(args.deploy, "**", "*.yaml"), recursive=True))):
            spec = doc.get("spec") or {}
            names.update(spec.get("hostnames") or [])
            names.update(lst["hostname"] for lst in spec.get("listeners") or [] if lst.get("hostname"))
        print("\n".join(sorted(n for n in names if "*" not in n)))
        return

    base = sorted(glob.glob(os.path.join(args.deploy, "base", "*.yaml")))
    variant = sorted(glob.glob(os.path.join(args.deploy, args.variant, "*.yaml")))
    if not base or not variant:
        sys.exit(f"standalone: no manifests in {args.deploy}/base or {args.deploy}/{args.variant}")
    shim_host, shim_port = args.shim.rsplit(":", 1)

    out, hostnames, filter_configs, listeners = [], set(), [], []
    namespace = None
    tls_refs = set()
    docs = load(base + variant)
    proxies = {}
    for path, doc in docs:
        kind, meta = doc["kind"], doc.setdefault("metadata", {})
        where = f"{os.path.relpath(path, args.deploy)}: {kind} {meta.get('name')}"
        if kind not in SUPPORTED:
            note(f"{where}: dropped (a Kubernetes workload; runs on this host instead)")
            continue
        doc = copy.deepcopy(doc)
        spec = doc.get("spec", {})
        if kind == "EnvoyProxy":
            proxies[(meta.get("namespace"), meta["name"])] = doc
        elif kind == "Gateway":
            namespace = meta.get("namespace", "default")
            for lst in spec.get("listeners", []):
                if lst.get("port") != args.port:
                    note(f"{where}: listener {lst['name']} port {lst.get('port')} -> {args.port}")
                    lst["port"] = args.port
                listeners.append(lst["name"])
                if lst.get("hostname"):
                    hostnames.add(lst["hostname"])
                for ref in (lst.get("tls") or {}).get("certificateRefs", []):
                    tls_refs.add((ref.get("namespace", namespace), ref["name"]))
        elif kind in ("HTTPRoute", "GRPCRoute", "TLSRoute"):
            hostnames.update(spec.get("hostnames", []))
        elif kind == "Backend":
            eps = spec.get("endpoints")
            spec["endpoints"] = [{"ip": {"address": shim_host, "port": int(shim_port)}}]
            note(f"{where}: endpoints {json.dumps(eps)} -> the shim at {args.shim}")
        elif kind == "EnvoyExtensionPolicy":
            for w in spec.get("wasm", []):
                code = w["code"]
                if code["type"] == "Image":
                    code["image"]["url"] = args.image
                    code["image"]["sha256"] = args.image_sha256
                    note(f"{where}: wasm {w.get('name')} image -> {args.image} (sha256 {args.image_sha256[:12]}...)")
                elif code["type"] == "HTTP":
                    code["http"]["url"] = args.http_url
                    code["http"]["sha256"] = args.http_sha256
                    code["http"]["tls"] = {"caCertificateRef": {"kind": "Secret", "name": "ferry-wasm-ca"}}
                    note(f"{where}: wasm {w.get('name')} url -> {args.http_url} (sha256 {args.http_sha256[:12]}..., dev CA)")
                else:
                    sys.exit(f"standalone: {where}: code type {code['type']} is not served here")
                if args.filter_config is not None:
                    note(f"{where}: wasm {w.get('name')} config {json.dumps(w.get('config'))} -> {args.filter_config}")
                    w["config"] = json.loads(args.filter_config)
                filter_configs.append(w.get("config"))
        out.append(doc)

    # The EnvoyProxy of the GatewayClass: Envoy on this host, at our Envoy's version. (The
    # file provider takes one EnvoyProxy, the GatewayClass's.)
    provider = {"type": "Host", "host": {"envoyVersion": args.envoy_version}}
    classes = [d for d in out if d["kind"] == "GatewayClass"]
    if len(classes) != 1:
        sys.exit("standalone: expected exactly one GatewayClass")
    ref = classes[0]["spec"].get("parametersRef")
    if ref:
        ep = proxies.get((ref.get("namespace"), ref["name"]))
        if ep is None:
            sys.exit(f"standalone: the GatewayClass names EnvoyProxy {ref['name']}, not in the manifests")
        ep = next(d for d in out if d["kind"] == "EnvoyProxy" and d["metadata"]["name"] == ref["name"]
                  and d["metadata"].get("namespace") == ref.get("namespace"))
        old = ep["spec"].get("provider")
        ep["spec"]["provider"] = provider
        note(f"EnvoyProxy {ref['name']}: provider {json.dumps(old)} -> {json.dumps(provider)}")
    else:
        out.append({"apiVersion": "gateway.envoyproxy.io/v1alpha1", "kind": "EnvoyProxy",
                    "metadata": {"name": "ferry-host", "namespace": CONTROLLER_NAMESPACE},
                    "spec": {"provider": provider}})
        classes[0]["spec"]["parametersRef"] = {"group": "gateway.envoyproxy.io", "kind": "EnvoyProxy",
                                               "name": "ferry-host", "namespace": CONTROLLER_NAMESPACE}
        note(f"GatewayClass: + EnvoyProxy ferry-host {json.dumps(provider)}")
    if namespace is None:
        sys.exit("standalone: no Gateway in the manifests")

    # What the operator creates in a cluster, and the Host-infrastructure workarounds.
    for ns, name in sorted(tls_refs):
        out.append({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                    "metadata": {"name": name, "namespace": ns},
                    "data": {"tls.crt": b64(args.gateway_cert), "tls.key": b64(args.gateway_key)}})
        note(f"+ Secret {ns}/{name}: the dev certificate ({args.gateway_cert})")
    out.append({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": "ferry-wasm-ca", "namespace": namespace},
                "data": {"ca.crt": b64(args.ca)}})
    eg_envoy = os.path.join(args.eg_certs, "envoy")
    out.append({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                "metadata": {"name": "envoy", "namespace": CONTROLLER_NAMESPACE},
                "data": {k: b64(os.path.join(eg_envoy, k)) for k in ("ca.crt", "tls.crt", "tls.key")}})
    note(f"+ Secret {CONTROLLER_NAMESPACE}/envoy from {eg_envoy} (workaround: README.md, 'Envoy's client certificate')")
    gateway = next(d for d in out if d["kind"] == "Gateway")
    out.append({
        "apiVersion": "gateway.envoyproxy.io/v1alpha1", "kind": "EnvoyPatchPolicy",
        "metadata": {"name": "ferry-host-wasm-cluster-ca", "namespace": namespace},
        "spec": {
            "targetRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway",
                          "name": gateway["metadata"]["name"]},
            "type": "JSONPatch",
            "jsonPatches": [{
                "type": "type.googleapis.com/envoy.config.cluster.v3.Cluster",
                "name": "wasm_cluster",
                "operation": {
                    "op": "replace",
                    "path": "/transport_socket/typed_config/common_tls_context/validation_context/trusted_ca/filename",
                    "value": os.path.join(args.eg_certs, "envoy-gateway", "ca.crt"),
                },
            }],
        },
    })
    note(f"+ EnvoyPatchPolicy {namespace}/ferry-host-wasm-cluster-ca (workaround: README.md, 'wasm_cluster CA')")

    with open(args.out, "w") as f:
        f.write(f"# Generated by mesh/envoy-gateway/standalone.py from {args.deploy} "
                f"(base + {args.variant}); do not edit.\n")
        yaml.safe_dump_all(out, f, sort_keys=False)
    json.dump({"hostnames": sorted(hostnames), "filter_configs": filter_configs,
               "namespace": namespace, "gateway": gateway["metadata"]["name"],
               "listeners": listeners}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
