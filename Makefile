# Two entry points on a fresh machine: `make demo` (the main job) and `make test` (the suite).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test test-all demo lint typecheck bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[spark,dev]'
	touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -m "not slow" -q

test-all: $(STAMP)
	$(PY) -m pytest -q

demo: $(STAMP)
	$(PY) -m remoting demo

lint: $(STAMP)
	$(VENV)/bin/ruff check codec processors remoting tests bench examples
	$(VENV)/bin/mypy

bench: $(STAMP)
	-$(PY) bench/codec.py
	$(PY) bench/rpc.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
