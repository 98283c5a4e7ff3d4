# Deployment manifests (deploy/istio, deploy/envoy-gateway; docs/guides/istio.md,
# docs/guides/envoy-gateway.md) checked against the real CRD schemas.
#
#   make check-deploy   every document of deploy/**/*.yaml against its CRD's
#                       openAPIV3Schema, strictly (unknown fields fail), the filter's
#                       configuration in each manifest against docs/reference/settings.md, then broken
#                       copies that must be refused; one line per document and a summary.
#                       Where Envoy (`make deps`) and the built filter ($(WASM)) are
#                       present, every document that configures the filter is also loaded
#                       by `envoy --mode validate` with the filter (its Envoy fields, which
#                       the CRDs leave unchecked, and the filter's own judgement of its
#                       configuration); otherwise that stage says it was skipped.
#
# The CRDs come from pinned Go modules through the Go module proxy, into a module cache of
# our own (target/deploy/gomod, writable so `rm -rf target` works), and are reduced once to
# target/deploy/schemas.json; after that a run takes about a second. Python needs
# jsonschema and PyYAML: python3's own, else the repository's .venv, else
# target/deploy-venv (made here, from PyPI).

DEPLOY_ISTIO_API := istio.io/api@v1.32.0
DEPLOY_ENVOY_GATEWAY := github.com/envoyproxy/gateway@v1.9.1
DEPLOY_GATEWAY_API := sigs.k8s.io/gateway-api@v1.6.3
DEPLOY_WORK := target/deploy
DEPLOY_SCHEMAS := $(DEPLOY_WORK)/schemas.json
DEPLOY_VENV := target/deploy-venv

# Prints a Python that has jsonschema and yaml (making target/deploy-venv if need be).
define deploy_python
for py in python3 .venv/bin/python $(DEPLOY_VENV)/bin/python; do \
  if command -v $$py >/dev/null 2>&1 && $$py -c 'import jsonschema, yaml' 2>/dev/null; then echo $$py; exit 0; fi; \
done; \
python3 -m venv $(DEPLOY_VENV) >&2 && $(DEPLOY_VENV)/bin/pip install -q jsonschema pyyaml >&2 && echo $(DEPLOY_VENV)/bin/python
endef

.PHONY: check-deploy
check-deploy: $(DEPLOY_SCHEMAS)
	@py=$$($(deploy_python)) && source scripts/env.sh && \
	$$py deploy/check.py check --schemas $(DEPLOY_SCHEMAS) --readme docs/reference/settings.md \
	  --work $(DEPLOY_WORK)/negative --envoy "$$ENVOY" --wasm $(WASM) deploy

$(DEPLOY_SCHEMAS): mk/deploy.mk deploy/check.py
	@mkdir -p $(DEPLOY_WORK)
	@cd $(DEPLOY_WORK) && GOMODCACHE=$(CURDIR)/$(DEPLOY_WORK)/gomod GOFLAGS=-modcacherw GOWORK=off \
	  GO111MODULE=on go mod download -json $(DEPLOY_ISTIO_API) $(DEPLOY_ENVOY_GATEWAY) $(DEPLOY_GATEWAY_API) \
	  > modules.json || { cat modules.json; exit 1; }
	@py=$$($(deploy_python)) && \
	$$py deploy/check.py extract --go-json $(DEPLOY_WORK)/modules.json --out $@ \
	  --crds '$(DEPLOY_ISTIO_API)=kubernetes/customresourcedefinitions.gen.yaml' \
	  --crds '$(DEPLOY_ENVOY_GATEWAY)=charts/gateway-helm/charts/crds/crds/generated/*.yaml' \
	  --crds '$(DEPLOY_ENVOY_GATEWAY)=charts/gateway-helm/charts/crds/crds/gatewayapi-crds.yaml' \
	  --crds '$(DEPLOY_GATEWAY_API)=config/crd/standard/*.yaml'
