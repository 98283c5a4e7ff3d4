# OCI images of the filter for Istio's WasmPlugin and Envoy Gateway's EnvoyExtensionPolicy
# (docs/guides/oci-image.md). No Docker engine: a Go tool (deploy/oci, go-containerregistry).
#
#   make oci         target/oci/{compat,oci}/ (OCI image layouts), ferry_filter.wasm.sha256,
#                    compat.digest, oci.digest, images.json
#   make oci-check   push both to a registry on 127.0.0.1 (in process), pull them back by the
#                    fetchers' rules, compare module bytes, sha256 and digests; one summary line
#   make oci-push    push one variant to your registry:
#                      make oci-push OCI_REF=registry.example.com/ferry/filter:0.1.0
#                      make oci-push OCI_VARIANT=oci OCI_REF=registry.example.com/ferry/filter:0.1.0-oci
#                    credentials from ~/.docker/config.json (or DOCKER_CONFIG); plain HTTP only
#                    to loopback (localhost, 127.0.0.0/8, ::1), TLS everywhere else.
#
# OCI_TAG      tag of the default OCI_REF (default: the workspace version in Cargo.toml)
# OCI_REF      where oci-push pushes (default: localhost:5000/ferry/filter:$(OCI_TAG))
# OCI_VARIANT  compat (default; what Istio and Envoy Gateway pull) or oci

GO ?= go
OCI_TOOL := target/ferry-oci
OCI_DIR := target/oci
OCI_TAG ?= $(shell sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -n1)
OCI_REF ?= localhost:5000/ferry/filter:$(OCI_TAG)
OCI_VARIANT ?= compat

.PHONY: oci oci-check oci-push

$(OCI_TOOL): deploy/oci/go.mod deploy/oci/go.sum $(wildcard deploy/oci/*.go)
	cd deploy/oci && $(GO) build -trimpath -buildvcs=false -o $(CURDIR)/$(OCI_TOOL) .

oci: wasm $(OCI_TOOL)
	$(OCI_TOOL) build --wasm $(WASM) --out $(OCI_DIR)

oci-check: oci
	$(OCI_TOOL) roundtrip --layout $(OCI_DIR) --wasm $(WASM)

oci-push: oci
	$(OCI_TOOL) push --layout $(OCI_DIR) --variant $(OCI_VARIANT) --ref $(OCI_REF)
