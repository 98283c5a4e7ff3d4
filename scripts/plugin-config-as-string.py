#!/usr/bin/env python3
"""Rewrites a rendered Envoy config so the Ferry filter's configuration is a JSON
string (google.protobuf.StringValue), as Istio's WasmPlugin and Envoy Gateway hand it,
instead of our Struct; optional KEY=JSON arguments change keys first.
  plugin-config-as-string.py IN OUT [key=json ...]   (make validate uses it)"""
import json, sys
import yaml

src, dst, *edits = sys.argv[1:]
doc = yaml.safe_load(open(src))
found = 0
seen = set()  # YAML aliases (the QUIC listener shares the TCP one's filters)


def walk(node):
    global found
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, dict):
        cfg = node.get("configuration")
        if node.get("root_id") == "ferry" and isinstance(cfg, dict) and "value" in cfg:
            value = cfg["value"]
            for edit in edits:
                key, raw = edit.split("=", 1)
                value[key] = json.loads(raw)
            node["configuration"] = {
                "@type": "type.googleapis.com/google.protobuf.StringValue",
                "value": json.dumps(value),
            }
            found += 1
        for v in node.values():
            walk(v)
    elif isinstance(node, list):
        for v in node:
            walk(v)


walk(doc)
if not found:
    sys.exit(f"{src}: no Ferry filter configuration found")
yaml.safe_dump(doc, open(dst, "w"), sort_keys=False)
