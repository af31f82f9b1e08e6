# Two commands do all the set-up: `make demo` and `make test` create .venv and install the package first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast bench docs docs-serve clean real-server k8s-base

# setup.py and the scanner's C source too: an editable install compiles the extension once, at install
$(STAMP): pyproject.toml setup.py loadtest/client/_scanner.c
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m loadtest.demo

# llama.cpp's llama-server, built once per machine from the llama-cpp-python sdist and cached
# in ~/.cache/loadtest/llama-server/<version>/ (LOADTEST_CACHE moves it); the real-server tests use it.
real-server: $(STAMP)
	nice -n 10 $(BIN)/python tests/support/realserver/build_llama_server.py

# The whole suite (tests/unit, tests/e2e, tests/real): the CI command (.ci/run). Three passes
# (docs/testing.md, "Which tests share the cores"):
#  1. the tests that time nothing (tests/unit and the e2e tests marked untimed), three at a time
#     under pytest-xdist (a file stays on one worker, so a module fixture runs once), in the
#     background at the idle scheduling class (SCHED_IDLE: a timing test's process that wakes
#     takes the core at once), beside pass 2; its output is printed when it ends;
#  2. the timing tests whose bounds leave room for one neighbour (a capacity, a verdict or a
#     latency with a margin of 20% or more from the mock's model), two at a time;
#  3. once 1 and 2 have ended: the solo tests (ms-level bounds, the gate's same-server verdicts,
#     llama-server, the host-contention test), one at a time; `solo` wins over `untimed`.
# Every pass runs; any failing fails the target.
# First the package's and the tests' bytecode is written: compileall writes it even where
# PYTHONDONTWRITEBYTECODE is set (as in the development sandbox), and otherwise every one of the
# suite's thousands of Python processes (each run, its judge and record writer) compiles
# loadtest's ~150 modules again: about 0.2 s of CPU each time.
IDLE := $(shell chrt --idle 0 true 2>/dev/null && echo chrt --idle 0 || echo nice -n 19)
test: $(STAMP) real-server
	$(BIN)/python -m compileall -q -j 0 loadtest tests benchmarks >/dev/null
	log=$$(mktemp); \
	$(IDLE) $(BIN)/python -m pytest -q -n 3 --dist loadfile -m "(unit or untimed) and not solo" >$$log 2>&1 & bg=$$!; \
	$(BIN)/python -m pytest -q -n 2 --dist loadfile -m "not (unit or untimed or solo)"; paired=$$?; \
	wait $$bg; untimed=$$?; echo "== pass 1 (untimed, in the background):"; cat $$log; rm -f $$log; \
	$(BIN)/python -m pytest -q -m "solo"; solo=$$?; \
	test $$untimed -eq 0 -a $$paired -eq 0 -a $$solo -eq 0

# tests/unit only: pure functions over data, no sockets, no subprocesses, two at a time.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadfile tests/unit

# deploy/kubernetes/base from the renderer (`loadtest k8s render`); a test checks they agree.
k8s-base: $(STAMP)
	$(BIN)/python -m loadtest.deploy.base deploy/kubernetes/base

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

# the documentation site (mkdocs.yml, docs/): built with --strict, so a broken link fails it
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict

docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs serve --dev-addr 127.0.0.1:8001

clean:
	rm -rf $(VENV) .pytest_cache site
