#!/usr/bin/env python3
"""Checks the deployment manifests (deploy/**/*.yaml) against the real CRD schemas.

Run by `make check-deploy` (mk/deploy.mk), in two steps:

  check.py extract --go-json MODULES.json --crds MODULE@VERSION=GLOB ... --out SCHEMAS.json
      reads the CustomResourceDefinitions of the pinned Go modules (MODULES.json is the
      output of `go mod download -json`), keeps each served version's openAPIV3Schema made strict, and
      writes them to one JSON file (the cache that makes later runs take about a second);
  check.py check --schemas SCHEMAS.json --readme docs/reference/settings.md --work DIR deploy
      validates every document, checks the filter's configuration in each manifest,
      then makes broken copies of real documents and requires each to be refused.

Strict means: an object schema that lists `properties` and does not say
`x-kubernetes-preserve-unknown-fields` gets `additionalProperties: false`, so a misspelt
field fails instead of being pruned by the API server. `nullable`,
`x-kubernetes-int-or-string` and `x-kubernetes-embedded-resource` are translated to
JSON Schema. `metadata` is checked against a strict ObjectMeta subset (name, namespace,
labels, annotations). CEL rules (`x-kubernetes-validations`) are not evaluated: they are
counted and reported.

A document whose kind has a CRD must validate against every source that defines that
version (Gateway API kinds: Envoy Gateway's bundled CRDs and upstream's standard channel).
Core kinds (Namespace, Service, Deployment, ...) are listed as not schema-checked; any
other kind fails.
"""

import argparse
import copy
import glob
import json
import os
import re
import sys
import shutil
import time

import yaml
from jsonschema import Draft4Validator

try:
    YAML_LOADER = yaml.CSafeLoader
except AttributeError:  # PyYAML without libyaml
    YAML_LOADER = yaml.SafeLoader

# Core kinds that may stand beside the CRDs, by (apiVersion, kind): listed, not checked.
CORE_KINDS = {
    ("v1", "Namespace"): "Cluster",
    ("v1", "Service"): "Namespaced",
    ("v1", "Secret"): "Namespaced",
    ("v1", "ConfigMap"): "Namespaced",
    ("v1", "ServiceAccount"): "Namespaced",
    ("apps/v1", "Deployment"): "Namespaced",
}

DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"

# The subset of ObjectMeta a manifest in this repository may use.
OBJECT_META = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "maxLength": 253, "pattern": DNS_SUBDOMAIN},
        "namespace": {"type": "string", "maxLength": 63, "pattern": DNS_LABEL},
        "labels": {
            "type": "object",
            "additionalProperties": {"type": "string", "maxLength": 63, "pattern": LABEL_VALUE},
        },
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}

WASM_TYPE = "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm"
STRING_VALUE_TYPE = "type.googleapis.com/google.protobuf.StringValue"
STRUCT_TYPE = "type.googleapis.com/google.protobuf.Struct"
HOLD_FLAG = "allow_on_headers_stop_iteration"


# ---------------------------------------------------------------------------------------
# extract: CRDs -> strict schemas


def strictify(node, counts):
    """Makes one schema node (and its structural children) strict, in place."""
    if not isinstance(node, dict):
        return
    counts["cel"] += len(node.get("x-kubernetes-validations") or [])
    if node.get("nullable") is True and isinstance(node.get("type"), str):
        node["type"] = [node["type"], "null"]
    if node.get("x-kubernetes-int-or-string") and "type" not in node and "anyOf" not in node:
        node["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    props = node.get("properties")
    if node.get("x-kubernetes-embedded-resource") and isinstance(props, dict):
        props.setdefault("apiVersion", {"type": "string"})
        props.setdefault("kind", {"type": "string"})
        props.setdefault("metadata", {"type": "object"})
    if isinstance(props, dict):
        for child in props.values():
            strictify(child, counts)
        if not node.get("x-kubernetes-preserve-unknown-fields") and "additionalProperties" not in node:
            node["additionalProperties"] = False
            counts["strict"] += 1
    items = node.get("items")
    if isinstance(items, dict):
        strictify(items, counts)
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        strictify(extra, counts)
    # anyOf/oneOf/allOf/not hold value validations only (structural schemas): not made
    # strict themselves, the node above them already is.


def top_level(schema):
    """The document schema: apiVersion, kind, metadata, then the CRD's own fields."""
    schema = copy.deepcopy(schema)
    props = schema.setdefault("properties", {})
    props["apiVersion"] = {"type": "string"}
    props["kind"] = {"type": "string"}
    crd_meta = props.get("metadata")
    if isinstance(crd_meta, dict) and set(crd_meta) - {"type", "description"}:
        props["metadata"] = {"allOf": [crd_meta, OBJECT_META]}
    else:
        props["metadata"] = OBJECT_META
    schema["required"] = sorted(set(schema.get("required", [])) | {"apiVersion", "kind", "metadata"})
    return schema


def crd_source_label(doc, module_label):
    """Where a CRD comes from, with Gateway API's own bundle version and channel."""
    ann = (doc.get("metadata") or {}).get("annotations") or {}
    bundle = ann.get("gateway.networking.k8s.io/bundle-version")
    channel = ann.get("gateway.networking.k8s.io/channel")
    if bundle and not module_label.startswith("sigs.k8s.io/gateway-api@"):
        return f"{module_label} (bundled Gateway API {bundle} {channel})"
    if channel:
        return f"{module_label} ({channel})"
    return module_label


def module_dirs(go_json):
    """Module@version -> directory, from `go mod download -json` output (a JSON stream)."""
    with open(go_json) as f:
        text = f.read()
    dirs, pos, decoder = {}, 0, json.JSONDecoder()
    while pos < len(text):
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            break
        obj, pos = decoder.raw_decode(text, pos)
        label = f"{obj.get('Path')}@{obj.get('Version')}"
        if obj.get("Error") or not obj.get("Dir"):
            sys.exit(f"check-deploy: go mod download {label}: {obj.get('Error', 'no directory')}")
        dirs[label] = obj["Dir"]
    return dirs


def extract(args):
    kinds = {}
    sources = []
    counts = {"crds": 0, "cel": 0, "strict": 0}
    dirs = module_dirs(args.go_json)
    for spec in args.crds:
        label, _, rel = spec.partition("=")
        if label not in dirs:
            sys.exit(f"check-deploy: {label} is not in {args.go_json}")
        pattern = os.path.join(dirs[label], rel)
        files = sorted(glob.glob(pattern))
        if not files:
            sys.exit(f"check-deploy: no CRD file matches {label}/{rel}")
        for path in files:
            with open(path) as f:
                docs = list(yaml.load_all(f, Loader=YAML_LOADER))
            found = 0
            for doc in docs:
                if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                    continue
                spec_ = doc["spec"]
                group, kind = spec_["group"], spec_["names"]["kind"]
                source = crd_source_label(doc, label)
                entry = kinds.setdefault(f"{group}/{kind}", {"scope": spec_["scope"], "versions": {}})
                for version in spec_["versions"]:
                    schema = (version.get("schema") or {}).get("openAPIV3Schema")
                    if schema is None:
                        continue
                    schema = top_level(schema)
                    strictify(schema, counts)
                    entry["versions"].setdefault(version["name"], []).append(
                        {"source": source, "served": bool(version.get("served")), "schema": schema}
                    )
                found += 1
            counts["crds"] += found
            sources.append({"file": os.path.relpath(path, dirs[label]), "crds": found, "label": label})
    out = {"sources": sources, "counts": counts, "kinds": kinds}
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(out, f)
    os.replace(tmp, args.out)
    print(
        f"check-deploy: {counts['crds']} CRDs from {len(sources)} files of {len(dirs)} modules -> {args.out} "
        f"({counts['strict']} object schemas made strict, {counts['cel']} CEL rules not evaluated)"
    )


# ---------------------------------------------------------------------------------------
# check: documents


class Result:
    def __init__(self):
        self.lines = []
        self.valid = 0
        self.core = 0
        self.failed = 0
        self.configs = 0


def doc_name(doc):
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    ns = meta.get("namespace")
    name = meta.get("name", "?")
    return f"{ns}/{name}" if ns else str(name)


def split_api_version(api_version):
    if "/" in api_version:
        group, version = api_version.split("/", 1)
        return group, version
    return "", api_version


def schema_errors(validator, doc, limit=4):
    errors = sorted(validator.iter_errors(doc), key=lambda e: (list(e.absolute_path), e.message))
    out = []
    for e in errors[:limit]:
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in e.absolute_path) or "."
        out.append(f"{path}: {e.message}")
    if len(errors) > limit:
        out.append(f"... {len(errors) - limit} more")
    return out


def check_document(doc, kinds, validators):
    """(status, detail, errors) for one document: status is ok, core or FAIL."""
    if not isinstance(doc, dict):
        return "FAIL", "", ["a document must be a mapping"]
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return "FAIL", "", ["apiVersion and kind are required"]
    group, version = split_api_version(api_version)
    entry = kinds.get(f"{group}/{kind}")
    if entry is None:
        scope = CORE_KINDS.get((api_version, kind))
        if scope is None:
            return "FAIL", "", [f"unknown kind {api_version} {kind}: no CRD of the pinned modules defines it, and it is no allowed core kind"]
        errs = []
        meta = doc.get("metadata")
        if not isinstance(meta, dict) or not meta.get("name"):
            errs.append("metadata.name is required")
        elif scope == "Namespaced" and not meta.get("namespace"):
            errs.append("metadata.namespace is required (namespaced kind)")
        return ("FAIL" if errs else "core"), "core kind, not schema-checked", errs
    variants = entry["versions"].get(version)
    if not variants:
        return "FAIL", "", [f"{kind} has no version {version} (known: {', '.join(sorted(entry['versions']))})"]
    errs = []
    sources = []
    for i, variant in enumerate(variants):
        if not variant["served"]:
            errs.append(f"{api_version} is not served ({variant['source']})")
            continue
        key = (group, kind, version, i)
        if key not in validators:
            validators[key] = Draft4Validator(variant["schema"])
        found = schema_errors(validators[key], doc)
        errs += [f"{e}  [{variant['source']}]" for e in found]
        sources.append(variant["source"])
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    if entry["scope"] == "Namespaced" and "namespace" not in meta:
        errs.append("metadata.namespace is required (namespaced kind)")
    if entry["scope"] == "Cluster" and "namespace" in meta:
        errs.append("metadata.namespace must not be set (cluster-scoped kind)")
    return ("FAIL" if errs else "ok"), "; ".join(sources), errs


# ---------------------------------------------------------------------------------------
# check: the filter's configuration


def readme_keys(readme):
    """The keys of docs/reference/settings.md's filter table (dotted for nested ones),
    which filter/core's tests hold to the filter's parser."""
    with open(readme) as f:
        text = f.read()
    m = re.search(r"<!-- filter keys: begin -->(.*?)<!-- filter keys: end -->", text, re.S)
    if not m:
        sys.exit(f"check-deploy: no filter keys table in {readme}")
    keys = set(re.findall(r"^\|\s*`([a-z0-9_.]+)`\s*\|", m.group(1), re.M))
    if not keys:
        sys.exit(f"check-deploy: no keys in the filter keys table of {readme}")
    return keys


def check_config(config, known, where):
    """Errors of one filter configuration (a dict, or a JSON string)."""
    if isinstance(config, str):
        try:
            config = json.loads(config) if config.strip() else {}
        except ValueError as e:
            return [f"{where}: not JSON: {e}"], None
    if not isinstance(config, dict):
        return [f"{where}: the configuration must be an object"], None
    errs = []
    tops = {k.split(".")[0] for k in known}
    for key, value in config.items():
        if key not in tops:
            errs.append(f"{where}: unknown key {key!r} (docs/reference/settings.md \"The filter's keys\": {', '.join(sorted(known))})")
        elif isinstance(value, dict):
            for sub in value:
                if f"{key}.{sub}" not in known:
                    errs.append(f"{where}: unknown key '{key}.{sub}' (known: {', '.join(sorted(k for k in known if k.startswith(key + '.')))})")
        elif f"{key}" not in known:
            errs.append(f"{where}: {key!r} must be an object of {sorted(k for k in known if k.startswith(key + '.'))}")
    hold = config.get("header_hold", "auto")
    if hold not in ("auto", "off"):
        errs.append(f"{where}: header_hold must be \"auto\" or \"off\", not {hold!r}")
    affinity = config.get("session_affinity", False)
    if not isinstance(affinity, bool):
        errs.append(f"{where}: session_affinity must be true or false")
    if affinity is True and hold == "off":
        errs.append(f"{where}: session_affinity needs the header hold: with header_hold \"off\" set session_affinity to false")
    for key in ("max_request_bytes", "max_response_bytes"):
        if key in config and not (isinstance(config[key], int) and not isinstance(config[key], bool) and 1 <= config[key] <= 1 << 30):
            errs.append(f"{where}: {key} must be an integer from 1 to 1 GiB")
    envoy = (config.get("compression") or {}).get("envoy") if isinstance(config.get("compression"), dict) else None
    if envoy:
        errs.append(f"{where}: compression.envoy {envoy} names Envoy compressors, and no manifest here adds one: leave it empty (the filter compresses itself)")
    return errs, config


def wasm_configs(doc):
    """(where, configuration, hold_flag) of each Ferry filter configuration in a document.
    hold_flag: True/False when the document's own Wasm config says, None when it cannot."""
    kind, spec = doc.get("kind"), doc.get("spec") or {}
    out = []
    if kind == "WasmPlugin" and "pluginConfig" in spec:
        out.append(("spec.pluginConfig", spec["pluginConfig"], None))
    elif kind == "TrafficExtension" and "pluginConfig" in (spec.get("wasm") or {}):
        out.append(("spec.wasm.pluginConfig", spec["wasm"]["pluginConfig"], None))
    elif kind == "EnvoyExtensionPolicy":
        for i, w in enumerate(spec.get("wasm") or []):
            if isinstance(w, dict) and "config" in w:
                out.append((f"spec.wasm[{i}].config", w["config"], None))
    elif kind == "EnvoyFilter":
        def walk(node, path):
            if isinstance(node, dict):
                if node.get("@type") == WASM_TYPE and isinstance(node.get("config"), dict):
                    cfg = node["config"]
                    conf = cfg.get("configuration")
                    value = {}
                    if isinstance(conf, dict):
                        if conf.get("@type") in (STRING_VALUE_TYPE, STRUCT_TYPE):
                            value = conf.get("value", {})
                        else:
                            value = f"unsupported configuration type {conf.get('@type')!r}"
                    out.append((f"{path}.config.configuration", value, cfg.get(HOLD_FLAG) is True))
                for k, v in node.items():
                    walk(v, f"{path}.{k}")
            elif isinstance(node, list):
                for i, v in enumerate(node):
                    walk(v, f"{path}[{i}]")
        walk(spec, "spec")
    return out


def patches_hold(doc):
    """Whether a document adds the hold flag to a wasm filter (EnvoyPatchPolicy)."""
    if doc.get("kind") != "EnvoyPatchPolicy":
        return False
    for p in (doc.get("spec") or {}).get("jsonPatches") or []:
        op = (p or {}).get("operation") or {}
        if op.get("op") in ("add", "replace") and str(op.get("path", "")).endswith(HOLD_FLAG) and op.get("value") is True:
            return True
    return False


# ---------------------------------------------------------------------------------------
# check: the real Envoy and the real filter (when both are here)
#
# The CRD schemas cannot see inside an EnvoyFilter's or EnvoyPatchPolicy's Envoy config
# (x-kubernetes-preserve-unknown-fields), nor judge a filter configuration as the filter
# does. So each document that configures the Ferry filter becomes one listener of an Envoy
# bootstrap: its wasm filter (code: the built module; configuration: the JSON string the
# control planes hand over), the other HTTP filters its patches add, before the router,
# and its virtual host settings. `envoy --mode validate` then loads them all: Envoy checks
# every field, and the filter's on_configure checks its configuration.

ROUTER = {"name": "envoy.filters.http.router",
          "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}


def wasm_filter(name, config_json, wasm, extra=None):
    config = {"name": "ferry", "root_id": "ferry",
              "vm_config": {"vm_id": "ferry", "runtime": "envoy.wasm.runtime.v8",
                            "code": {"local": {"filename": wasm}}},
              "configuration": {"@type": STRING_VALUE_TYPE, "value": config_json}}
    config.update(extra or {})
    return {"name": name, "typed_config": {"@type": WASM_TYPE, "config": config}}


def envoy_parts(doc, wasm):
    """(http_filters before the router, virtual host fields) for one document, or None."""
    kind, spec = doc.get("kind"), doc.get("spec") or {}
    if kind in ("WasmPlugin", "TrafficExtension", "EnvoyExtensionPolicy"):
        return [wasm_filter("ferry", json.dumps(parsed), wasm) for _, conf, _ in wasm_configs(doc)
                for parsed in [conf if not isinstance(conf, str) else json.loads(conf or "{}")]], {}
    if kind == "EnvoyFilter":
        filters, vhost, ecds = [], {}, {}
        for p in spec.get("configPatches") or []:
            value = (p.get("patch") or {}).get("value") or {}
            if p.get("applyTo") == "EXTENSION_CONFIG":
                ecds[value.get("name")] = value.get("typed_config")
            elif p.get("applyTo") == "HTTP_FILTER":
                if "config_discovery" in value:
                    tc = copy.deepcopy(ecds.get(value["name"]))
                    if not tc:
                        raise ValueError(f"HTTP_FILTER {value['name']} names no EXTENSION_CONFIG of this EnvoyFilter")
                    if tc.get("@type") == WASM_TYPE:
                        tc["config"]["vm_config"]["code"] = {"local": {"filename": wasm}}
                    filters.append({"name": value["name"], "typed_config": tc})
                else:
                    filters.append(value)
            elif p.get("applyTo") == "VIRTUAL_HOST":
                vhost.update(value)
        return filters, vhost
    if kind == "EnvoyPatchPolicy":
        filters, hold = [], False
        for p in spec.get("jsonPatches") or []:
            op = p.get("operation") or {}
            if str(op.get("path", "")).endswith(HOLD_FLAG):
                hold = op.get("value") is True
            elif isinstance(op.get("value"), dict) and "typed_config" in op["value"]:
                if op["value"] not in filters:
                    filters.append(op["value"])
        return [wasm_filter("ferry", "{}", wasm, {HOLD_FLAG: hold})] + filters, {}
    return None


def envoy_bootstrap(parts):
    listeners = []
    for i, (label, (filters, vhost)) in enumerate(parts):
        vh = {"name": "ferry", "domains": ["*"],
              "routes": [{"match": {"prefix": "/psdb.v1alpha1.Database/"}, "route": {"cluster": "shim"}}]}
        vh.update(vhost)
        listeners.append({
            "name": f"doc{i}", "address": {"socket_address": {"address": "127.0.0.1", "port_value": 20000 + i}},
            "filter_chains": [{"filters": [{"name": "envoy.filters.network.http_connection_manager", "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                "stat_prefix": f"doc{i}", "route_config": {"name": f"doc{i}", "virtual_hosts": [vh]},
                "http_filters": filters + [ROUTER]}}]}]})
    shim = {"name": "shim", "type": "STATIC", "load_assignment": {"cluster_name": "shim", "endpoints": [
        {"lb_endpoints": [{"endpoint": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 8081}}}}]}]}}
    return {"static_resources": {"listeners": listeners, "clusters": [shim]}}


def envoy_validate(envoy, parts, work, name):
    import subprocess
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, f"{name}.json")
    with open(path, "w") as f:
        json.dump(envoy_bootstrap(parts), f, indent=1)
    run = subprocess.run([envoy, "--mode", "validate", "-c", path, "--disable-hot-restart", "-l", "error"],
                         capture_output=True, text=True, timeout=120)
    if run.returncode == 0:
        return []
    lines = [l for l in (run.stdout + run.stderr).splitlines() if "critical" in l or "error" in l.lower()]
    return [re.sub(r"^\[[^]]*\]\[\d+\]\[\w+\]\[\w+\] \[[^]]*\] ", "", l) for l in lines[-3:]] or ["envoy refused it"]


def envoy_stage(files, envoy, wasm, work):
    """Lines, failures: every filter-configuring document loaded by the real Envoy + filter."""
    if not envoy or not os.access(envoy, os.X_OK) or not wasm or not os.path.exists(wasm):
        return [f"envoy skipped: no Envoy ({envoy or 'unset'}: `make deps`) or no filter ({wasm or 'unset'}: `make wasm`)"], 0, 0
    parts, skipped = [], []
    for path in files:
        for n, doc in enumerate(load_file(path), 1):
            if isinstance(doc, dict):
                try:
                    got = envoy_parts(doc, wasm)
                except (ValueError, KeyError, TypeError, AttributeError) as e:
                    # Its configuration is malformed: the checks above have said so.
                    skipped.append(f"envoy skip  {path}#{n} {doc.get('kind')} {doc_name(doc)}: {e}")
                    continue
                if got and got[0]:
                    parts.append((f"{path}#{n} {doc.get('kind')} {doc_name(doc)}", got))
    if not parts:
        return skipped, 0, 0
    if not envoy_validate(envoy, parts, work, "all"):
        return skipped + [f"envoy ok    {label}" for label, _ in parts], len(parts), 0
    lines, failed = list(skipped), 0
    for i, (label, got) in enumerate(parts):
        errs = envoy_validate(envoy, [(label, got)], work, f"doc{i}")
        if errs:
            failed += 1
            lines.append(f"envoy FAIL  {label}")
            lines += [f"        {e}" for e in errs]
            lines.append(f"        (the filter: {wasm}; `make wasm` if it is older than the source)")
        else:
            lines.append(f"envoy ok    {label}")
    return lines, len(parts), failed


# ---------------------------------------------------------------------------------------
# check: files


def load_file(path):
    with open(path) as f:
        return [d for d in yaml.load_all(f, Loader=YAML_LOADER) if d is not None]


def check_files(files, kinds, known, validators, result, quiet=False):
    """Checks files (grouped by directory for the hold rule); returns all errors."""
    all_errors = []
    by_dir = {}
    for path in files:
        by_dir.setdefault(os.path.dirname(path), []).append(path)
    for directory, paths in sorted(by_dir.items()):
        needs_hold = []  # (label, where) of configs with session_affinity but no own hold flag
        dir_patches_hold = False
        for path in sorted(paths):
            try:
                docs = load_file(path)
            except yaml.YAMLError as e:
                line = f"FAIL  {path}: not YAML: {e}"
                result.failed += 1
                all_errors.append(line)
                result.lines.append(line)
                continue
            for n, doc in enumerate(docs, 1):
                label = f"{path}#{n}"
                status, detail, errs = check_document(doc, kinds, validators)
                what = f"{doc.get('kind', '?')} {doc_name(doc)}" if isinstance(doc, dict) else "?"
                if isinstance(doc, dict):
                    for where, conf, hold in wasm_configs(doc):
                        result.configs += 1
                        cerrs, parsed = check_config(conf, known, where)
                        errs = errs + cerrs
                        if parsed and parsed.get("session_affinity") is True:
                            if hold is False:
                                errs.append(f"{where}: session_affinity needs {HOLD_FLAG}: true in this Wasm config")
                            elif hold is None:
                                needs_hold.append((label, where, doc.get("kind")))
                        if parsed is not None and status != "FAIL":
                            keys = ",".join(sorted(parsed)) or "defaults"
                            detail = f"{detail}; filter config ok ({keys})"
                    if isinstance(doc, dict) and patches_hold(doc):
                        dir_patches_hold = True
                if errs:
                    status = "FAIL"
                if status == "FAIL":
                    result.failed += 1
                    all_errors += [f"{label}: {e}" for e in errs]
                    result.lines.append(f"FAIL  {label} {what}")
                    result.lines += [f"        {e}" for e in errs]
                elif status == "core":
                    result.core += 1
                    result.lines.append(f"core  {label} {what} ({detail})")
                else:
                    result.valid += 1
                    result.lines.append(f"ok    {label} {what} ({detail})")
        for label, where, kind in needs_hold:
            if not dir_patches_hold:
                hint = ("an EnvoyFilter cannot add it to a WasmPlugin: use escape-hatch/ instead"
                        if kind == "WasmPlugin" else "add an EnvoyPatchPolicy setting it (escape-hatch/)")
                e = f"{label}: {where}: session_affinity needs {HOLD_FLAG}: true, which {kind} cannot set; {hint}"
                result.failed += 1
                all_errors.append(e)
                result.lines.append(f"FAIL  {e}")
    if not quiet:
        for line in result.lines:
            print(line)
    return all_errors


# ---------------------------------------------------------------------------------------
# check: negative cases (broken copies of real documents, made on the fly)


def find_doc(files, kind, pred=lambda d: True):
    for path in files:
        for doc in load_file(path):
            if isinstance(doc, dict) and doc.get("kind") == kind and pred(doc):
                return copy.deepcopy(doc)
    sys.exit(f"check-deploy: no {kind} in deploy/ to break for a negative case")


def negative_cases(files):
    """(name, token the error must mention, [documents]) for each case."""
    wp = lambda: find_doc(files, "WasmPlugin", lambda d: (d["spec"].get("pluginConfig") or {}).get("header_hold") == "off")
    eep = lambda: find_doc(files, "EnvoyExtensionPolicy", lambda d: d["spec"]["wasm"][0]["code"]["type"] == "Image")
    cases = []

    d = wp(); d["spec"]["pluginConfg"] = d["spec"].pop("pluginConfig")
    cases.append(("misspelt field: WasmPlugin spec.pluginConfg", "pluginConfg", [d]))

    d = wp(); d["spec"]["phase"] = "BEFORE_EVERYTHING"
    cases.append(("bad enum: WasmPlugin phase BEFORE_EVERYTHING", "BEFORE_EVERYTHING", [d]))

    d = wp(); d["spec"]["failStrategy"] = "FAIL_SOMETIMES"
    cases.append(("bad enum: WasmPlugin failStrategy FAIL_SOMETIMES", "FAIL_SOMETIMES", [d]))

    d = find_doc(files, "Backend"); d["spec"]["appProtocols"] = ["gateway.envoyproxy.io/h2"]
    cases.append(("bad enum: Backend appProtocols gateway.envoyproxy.io/h2", "gateway.envoyproxy.io/h2", [d]))

    d = eep(); d["spec"]["wasm"][0]["code"]["type"] = "OCI"
    cases.append(("bad enum: EnvoyExtensionPolicy code.type OCI", "OCI", [d]))

    d = find_doc(files, "EnvoyPatchPolicy"); op = d["spec"]["jsonPatches"][0]["operation"]; op["jsonpath"] = op.pop("jsonPath")
    cases.append(("misspelt nested field: EnvoyPatchPolicy operation.jsonpath", "jsonpath", [d]))

    d = find_doc(files, "EnvoyFilter"); d["spec"]["configPatches"][0]["applyTo"] = "EXTENSION_CONFIGS"
    cases.append(("bad enum: EnvoyFilter applyTo EXTENSION_CONFIGS", "EXTENSION_CONFIGS", [d]))

    d = find_doc(files, "HTTPRoute"); d["sepc"] = d.pop("spec")
    cases.append(("misspelt top-level field: HTTPRoute sepc", "sepc", [d]))

    d = find_doc(files, "DestinationRule"); d["metadata"]["namspace"] = d["metadata"].pop("namespace")
    cases.append(("misspelt metadata field: DestinationRule metadata.namspace", "namspace", [d]))

    d = find_doc(files, "VirtualService"); d["spec"]["http"][0]["retries"]["attempts"] = "two"
    cases.append(("wrong type: VirtualService retries.attempts \"two\"", "two", [d]))

    d = wp(); d["kind"] = "WasmPlugins"
    cases.append(("unknown kind: WasmPlugins", "unknown kind", [d]))

    d = wp(); d["spec"]["pluginConfig"]["max_request_byte"] = 1024
    cases.append(("unknown filter key: pluginConfig.max_request_byte", "max_request_byte", [d]))

    d = eep(); d["spec"]["wasm"][0]["config"]["compression"] = {"prefrence": ["gzip"]}
    cases.append(("unknown filter key: config.compression.prefrence", "prefrence", [d]))

    d = eep(); d["spec"]["wasm"][0]["config"].update({"header_hold": "off", "session_affinity": True})
    cases.append(("filter rule: header_hold off with session_affinity true", "needs the header hold", [d]))

    d = eep(); d["spec"]["wasm"][0]["config"].update({"header_hold": "auto", "session_affinity": True})
    cases.append(("no hold: EnvoyExtensionPolicy session_affinity without an EnvoyPatchPolicy", HOLD_FLAG, [d]))

    d = find_doc(files, "EnvoyFilter")
    d["spec"]["configPatches"][0]["patch"]["value"]["typed_config"]["config"].pop(HOLD_FLAG)
    cases.append(("no hold: EnvoyFilter session_affinity without allow_on_headers_stop_iteration", HOLD_FLAG, [d]))
    return cases


def envoy_negative_cases(files):
    d = find_doc(files, "EnvoyFilter")
    cfg = d["spec"]["configPatches"][0]["patch"]["value"]["typed_config"]["config"]
    cfg["allow_on_headers_stop_iteraton"] = cfg.pop(HOLD_FLAG)
    e = find_doc(files, "EnvoyPatchPolicy")
    for p in e["spec"]["jsonPatches"]:
        v = p["operation"].get("value")
        if isinstance(v, dict) and "typed_config" in v:
            v["typed_config"]["stict"] = v["typed_config"].pop("strict")
    return [("Envoy field misspelt inside an EnvoyFilter: allow_on_headers_stop_iteraton", "allow_on_headers_stop_iteraton", d),
            ("Envoy field misspelt inside an EnvoyPatchPolicy: stict", "stict", e)]


def run_negative(files, kinds, known, validators, work):
    shutil.rmtree(work, ignore_errors=True)
    lines, passed_wrongly = [], 0
    cases = negative_cases(files)
    for i, (name, token, docs) in enumerate(cases, 1):
        d = os.path.join(work, f"{i:02d}")  # one directory per case: the hold rule is per directory
        os.makedirs(d)
        path = os.path.join(d, "broken.yaml")
        with open(path, "w") as f:
            yaml.safe_dump_all(docs, f, sort_keys=False)
        errors = check_files([path], kinds, known, validators, Result(), quiet=True)
        if not errors:
            passed_wrongly += 1
            lines.append(f"WRONG {name}: PASSED validation ({path})")
        elif not any(token in e for e in errors):
            passed_wrongly += 1
            lines.append(f"WRONG {name}: refused, but not for it: {errors[0]}")
        else:
            first = next(e for e in errors if token in e).split(": ", 1)[1]
            lines.append(f"neg   {name}: refused as expected: {first}")
    return lines, len(cases), passed_wrongly


def check(args):
    start = time.monotonic()
    with open(args.schemas) as f:
        data = json.load(f)
    kinds = data["kinds"]
    known = readme_keys(args.readme)
    files = sorted(
        p for root in args.paths
        for p in glob.glob(os.path.join(root, "**", "*.yaml"), recursive=True)
        if not os.path.abspath(p).startswith(os.path.abspath(args.work) + os.sep)
    )
    if not files:
        sys.exit(f"check-deploy: no *.yaml under {' '.join(args.paths)}")
    validators = {}
    result = Result()
    errors = check_files(files, kinds, known, validators, result)
    neg_lines, neg_total, neg_wrong = run_negative(files, kinds, known, validators, args.work)
    env_lines, env_total, env_failed = envoy_stage(files, args.envoy, args.wasm, os.path.join(args.work, "envoy"))
    if env_total:
        for i, (name, token, doc) in enumerate(envoy_negative_cases(files)):
            parts = [(name, envoy_parts(doc, args.wasm))]
            neg_total += 1
            errs = envoy_validate(args.envoy, parts, os.path.join(args.work, "envoy"), f"neg{i}")
            hit = [e for e in errs if token in e]
            if hit:
                at = hit[0].index(token)
                neg_lines.append(f"neg   {name}: refused by Envoy as expected: ...{hit[0][max(0, at - 60):at + 80]}...")
            else:
                neg_wrong += 1
                neg_lines.append(f"WRONG {name}: " + (f"refused, but not for it: {errs[0][:200]}" if errs else "Envoy loaded it"))
    for line in env_lines + neg_lines:
        print(line)
    docs = result.valid + result.core + result.failed
    mods = ", ".join(sorted({s["label"] for s in data["sources"]}))
    print(
        f"check-deploy: {docs} documents in {len(files)} files: {result.valid} valid against their CRD "
        f"schemas (strict), {result.core} core kinds not schema-checked, {result.failed} failed; "
        f"{result.configs} filter configurations checked; "
        + (f"{env_total - env_failed}/{env_total} documents loaded by Envoy with the filter; " if env_total else "Envoy stage skipped; ")
        + f"negative cases: {neg_total - neg_wrong}/{neg_total} "
        f"refused as expected; CRDs: {mods} ({data['counts']['cel']} CEL rules not evaluated); "
        f"{time.monotonic() - start:.1f}s"
    )
    if errors or neg_wrong or env_failed:
        sys.exit(1)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("extract")
    e.add_argument("--go-json", required=True, help="output of `go mod download -json MODULE@VERSION ...`")
    e.add_argument("--crds", action="append", required=True, help="MODULE@VERSION=GLOB of CRD files inside the module")
    e.add_argument("--out", required=True)
    c = sub.add_parser("check")
    c.add_argument("--schemas", required=True)
    c.add_argument("--readme", required=True)
    c.add_argument("--work", required=True, help="where the broken copies are written")
    c.add_argument("--envoy", help="an Envoy binary: load the filter configurations in it (skipped if absent)")
    c.add_argument("--wasm", help="the built filter module, for --envoy")
    c.add_argument("paths", nargs="+")
    args = parser.parse_args()
    extract(args) if args.cmd == "extract" else check(args)


if __name__ == "__main__":
    main()
