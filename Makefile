# `make test` runs the host suites; `make matrix` runs them in every lab cell (see README.md).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: test test-py39 lint conformance help

help:
	@echo "make test        host suites (creates $(VENV) on first use)"
	@echo "make test-py39   the same suites under Python 3.9"
	@echo "make lint        ruff, and mypy --strict on server/"
	@echo "make matrix      every suite in every lab cell (DISTRO=, PYTHON_VERSION=, JOBS=)"

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

test: $(VENV)/.installed
	$(PY) -m pytest -q tests/unit tests/http tests/payload tests/conformance

# pyenv's python3.9 shim refuses to run unless asked; this asks.
PY39 ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.9.*/bin/python3.9) $(shell command -v python3.9))
test-py39:
	$(MAKE) test PYTHON=$(PY39) VENV=.venv-py39

lint: $(VENV)/.installed
	$(PY) -m ruff check server tests matrix scripts bench
	$(PY) -m mypy
