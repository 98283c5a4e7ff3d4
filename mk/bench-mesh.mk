# What each deployment form of the filter costs (issue 24;
# docs/benchmarks/meshes.md "Deployment forms (meshes)"): warm SELECT 1 over HTTP/2, Connect JSON and proto, CPU per request of
# Envoy, the shim and MariaDB and p50/p99 at 16 and 1 connections, for Envoy as router-only,
# envoy/ferry.yaml, istio.yaml, istio-envoyfilter.yaml and envoy-gateway.yaml, in interleaved
# rounds on a stack of its own (.run/bench-mesh, ports 28843/29981/28881/53896/28849, stopped
# on exit). ~3 minutes. Results: .run/bench-mesh/mesh-cost.md. Knobs: loadtest/mesh-cost.sh.
.PHONY: bench-mesh
bench-mesh: build
	loadtest/mesh-cost.sh
