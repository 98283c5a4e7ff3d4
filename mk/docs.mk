# Every link in the docs resolves (scripts/check-links.py, offline, python3 only): relative
# Markdown links and their anchors, and the doc references in source comments (a .md path
# followed by a heading in double quotes, or by #anchor). Part of `make test`.
.PHONY: check-docs

check-docs:
	python3 scripts/check-links.py

# docs/reference/settings.md's stack table against scripts/env.sh (scripts/check-settings.py);
# its shim and filter tables are checked by the crates' unit tests. Part of `make test`.
.PHONY: check-settings
check-settings:
	python3 scripts/check-settings.py
