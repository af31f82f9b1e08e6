# Two commands do all the set-up: `make demo` and `make test` create .venv and install the package first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast bench clean real-server k8s-base

$(STAMP): pyproject.toml
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

# The whole suite (tests/unit, tests/e2e, tests/real): the CI command (.ci/run).
test: $(STAMP) real-server
	$(BIN)/python -m pytest -q

# tests/unit only: pure functions over data, no sockets, no subprocesses (about a minute).
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q tests/unit

# deploy/kubernetes/base from the renderer (`loadtest k8s render`); a test checks they agree.
k8s-base: $(STAMP)
	$(BIN)/python -m loadtest.deploy.base deploy/kubernetes/base

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) .pytest_cache
