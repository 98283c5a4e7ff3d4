# What the generated Envoy scenarios (scripts/envoy-replicas.py, envoy-tracing.py,
# envoy-shim-tls.py) share: ferry.yaml's body, and writing or checking the result.
import os, sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def ferry_body():
    """envoy/ferry.yaml after its leading comment block (each scenario has its own)."""
    lines = open(os.path.join(ROOT, "envoy/ferry.yaml")).read().splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if not line.startswith("#"))
    return "".join(lines[start:])


def write_or_check(name, text):
    """Writes envoy/NAME, or with --check fails if it differs from `text` (make validate)."""
    path = os.path.join(ROOT, "envoy", name)
    script = os.path.basename(sys.argv[0])
    if sys.argv[1:] == ["--check"]:
        if open(path).read() != text:
            sys.exit(f"envoy/{name} is out of date: run python3 scripts/{script}")
    else:
        open(path, "w").write(text)
        print(f"wrote envoy/{name}")
