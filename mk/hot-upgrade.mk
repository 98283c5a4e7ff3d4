# Upgrade without dropping traffic (issue 24; tests/mesh/hot-upgrade.sh): a stack of its own
# (.run/hot-upgrade, ports 18470/19970/18471/18472/43370; envoy/istio-envoyfilter.yaml, two
# shims), 20 s of k6 over HTTP/2 and HTTP/3 with sessions and transactions open, the filter
# swapped twice through ECDS (a new .wasm each time) meanwhile. Fails on any failed request,
# on config_reload not counting each swap, on config_fail, and on a wasm trap or panic in
# Envoy's log. One summary line; details in .run/hot-upgrade/hot-upgrade/.
.PHONY: hot-upgrade
hot-upgrade: build k6
	tests/mesh/hot-upgrade.sh
