# House rules of issue 25 for the Rust crates (scripts/check-house.py, python3 stdlib only).
#
#   make check-house   first the checker's self-test (a synthetic workspace in a temp dir:
#                      a cycle inside a nested folder module, a super:: cycle, a grouped-use
#                      cycle, a macro cycle, a clean crate), then every workspace crate: no
#                      import cycle between the files of a crate (test code left out), no
#                      shim source file over 600 lines. One summary line per crate; each
#                      cycle is listed with the line behind each of its edges. Fails on any.
#
# scripts/check-house.py --strict also follows edges from a file to its own ancestor
# module (super::Item, crate::Item of lib.rs), which the rule treats as hierarchy.

.PHONY: check-house
check-house:
	python3 scripts/check-house.py --self-test
	python3 scripts/check-house.py
