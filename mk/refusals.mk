# docs/reference/refusals.md against the code and the tests (scripts/check-refusals.py, offline,
# python3 only): each message is in the files it names, each test exists, no refusal is left out.
.PHONY: check-refusals
check-refusals:
	python3 scripts/check-refusals.py
