# `make test` runs the host suites; `make matrix` runs them in every lab cell (see README.md). tests/bundle
# installs the official MCP Bundle tool (npm @anthropic-ai/mcpb, pinned) into .cache/mcpb on first use;
# tests/clients the legacy era's real clients (the TypeScript and Python SDKs' 1.x, the Inspector's CLI,
# all pinned in tests/clients/client_tools.py) into .cache/clients, with npm and pip; tests/extensions the
# hosts of Skills and Apps (the TypeScript SDK 2.x, ext-apps, playwright-core) into .cache/extensions, and
# Debian's chromium with apt-get when it is missing.
PYTHON ?= python3
VENV ?= .venv
EXTRAS ?= dev
PY := $(VENV)/bin/python

.PHONY: test test-py39 test-auth test-clients lint lint-tools conformance help task-store-tools pypy-tools

help:
	@echo "make test        host suites (creates $(VENV) on first use)"
	@echo "make test-py39   the same suites under Python 3.9"
	@echo "make lint        ruff; mypy --strict on server/, matrix/ and scripts/; actionlint on the workflows"
	@echo "make docs        the documentation site into site/ (mkdocs --strict: a broken link or reference fails)"
	@echo "make docs-serve  the site on http://127.0.0.1:8000 with live reload (DOCS_ADDR=)"
	@echo "make test-auth   only the OAuth suite against a real authorization server (oidc-provider; Node 22 on first use)"
	@echo "make test-clients only the real legacy-era clients (SDKs 1.x, the Inspector; installed on first use)"
	@echo "make conformance the official MCP conformance suite against the examples over HTTP"
	@echo "make matrix      every suite in every lab cell (DISTRO=, PYTHON_VERSION=, ARCH=, SUITES=, JOBS=; ARCH=all SUITES=all: everything)"
	@echo "make matrix-publish  make matrix, then (a whole run that passed, of a committed tree) write its summary into"
	@echo "                 README.md, its report to docs/matrix.md and its grid to docs/img/report.png"
	@echo "make test-lab    the lab harness's own tests (ENGINE=1 adds those that drive Docker)"
	@echo "make clean-lab   remove everything the lab created (labelled containers/images/volumes, caches)"
	@echo "make bench       benchmarks against the official SDK and bare-stdlib ceilings; writes docs/reports/performance.md (ROUNDS=)"
	@echo "make bench-compare BASE=REV   this checkout against another, pair by pair and in instructions (PAIRS=)"
	@echo "make fuzz        1,000,000 fuzzed messages through the core, 100,000 through live stdio and HTTP, 20,000 legacy-session steps over each (FUZZ_CORE=, FUZZ_STDIO=, FUZZ_HTTP=, FUZZ_LEGACY_STDIO=, FUZZ_LEGACY_HTTP=, FUZZ_ARGS=)"
	@echo "make soak        10 minutes of mixed load on live servers, RSS/threads/fds sampled; writes docs/reports/performance.md (SOAK_MINUTES=; SOAK_FAULTS=1 injects faults beside the load)"

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[$(EXTRAS)]'
	touch $@

test: $(VENV)/.installed task-store-tools pypy-tools lab-browser  # tests/http's CORS test loads pages in Chromium
	$(PY) -m pytest -q tests/unit tests/http tests/payload tests/hostile tests/conformance tests/auth tests/bundle \
	  tests/clients tests/extensions tests/fuzz tests/task_store tests/recipes tests/bench tests/docs

# tests/task_store starts its own PostgreSQL servers from Debian's postgresql package (psycopg comes with the
# test extra). The package starts a cluster of its own on installation; nothing uses it, so it is stopped.
task-store-tools:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { echo "test: installing postgresql (apt-get) for tests/task_store"; \
	  export DEBIAN_FRONTEND=noninteractive; { apt-get install -y -qq --no-install-recommends postgresql >/dev/null 2>&1 \
	  || { apt-get update -qq && apt-get install -y -qq --no-install-recommends postgresql >/dev/null; }; } \
	  && { service postgresql stop >/dev/null 2>&1 || true; }; }

# tests/unit/test_pypy_nursery.py shows Debian's pypy3 a big-cache CPU and a small-cache one (a /proc/cpuinfo of
# its own, in a mount namespace), to check that the command line bounds PyPy's nursery on both.
pypy-tools:
	@command -v pypy3 >/dev/null 2>&1 || { echo "test: installing pypy3 (apt-get) for tests/unit/test_pypy_nursery.py"; \
	  export DEBIAN_FRONTEND=noninteractive; apt-get install -y -qq --no-install-recommends pypy3 >/dev/null 2>&1 \
	  || { apt-get update -qq && apt-get install -y -qq --no-install-recommends pypy3 >/dev/null; }; }

# pyenv's python3.9 shim refuses to run unless asked; this asks.
PY39 ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.9.*/bin/python3.9) $(shell command -v python3.9))
test-py39:
	$(MAKE) test PYTHON=$(PY39) VENV=.venv-py39 EXTRAS=test

# OAuth against oidc-provider (npm, pinned; installs it and Node 22 into .cache/oidc-provider on first use).
# Part of `make test`; this runs it alone.
test-auth: $(VENV)/.installed
	$(PY) -m pytest -q tests/auth

# Real clients of the legacy era against the examples (part of `make test`; this runs them alone).
test-clients: $(VENV)/.installed
	$(PY) -m pytest -q tests/clients

# The official conformance suite (npm, pinned; installs Node 22 into .cache/conformance on first use).
conformance: $(VENV)/.installed
	$(PY) scripts/conformance.py

# actionlint checks the workflows, and with shellcheck the shell in their run: steps. Without shellcheck on
# PATH it skips those checks without a word (even when given its path), so lint-tools installs Debian's
# package and lint fails where it cannot. pyflakes is off: no workflow step runs inline Python.
lint: $(VENV)/.installed lint-tools
	$(PY) -m ruff check server tests matrix scripts bench
	$(PY) -m mypy
	$(VENV)/bin/actionlint -shellcheck=shellcheck -pyflakes= .github/workflows/*.yml

lint-tools:
	@command -v shellcheck >/dev/null 2>&1 || { echo "lint: installing shellcheck (apt-get) for actionlint"; \
	  export DEBIAN_FRONTEND=noninteractive; apt-get install -y -qq --no-install-recommends shellcheck >/dev/null 2>&1 \
	  || { apt-get update -qq && apt-get install -y -qq --no-install-recommends shellcheck >/dev/null; }; }
	@command -v shellcheck >/dev/null 2>&1 || { echo "lint: no shellcheck on PATH, and actionlint would skip its checks"; exit 1; }

# --- the documentation site (mkdocs.yml, docs/; tests/docs runs its examples in make test) -------------------
# The tools are the docs extra's, in the dev venv. Mermaid (the diagrams) is served with the site, from the npm
# package pinned here, so the pages draw them without reaching a CDN; without npm the theme loads it from one.
MERMAID ?= 11.12.1
DOCS_ADDR ?= 127.0.0.1:8000
DOCS_JS := docs/js/mermaid.min.js
export NO_MKDOCS_2_WARNING := 1  # Material's banner about MkDocs 2.0 on every build

.PHONY: docs docs-serve

docs: $(VENV)/.installed $(DOCS_JS)
	$(PY) -m mkdocs build --strict

docs-serve: $(VENV)/.installed $(DOCS_JS)
	$(PY) -m mkdocs serve --livereload --dev-addr $(DOCS_ADDR)

$(DOCS_JS): Makefile
	@mkdir -p .cache/docs docs/js
	@if [ ! -f .cache/docs/mermaid-$(MERMAID).tgz ]; then \
	  (cd .cache/docs && npm pack --silent mermaid@$(MERMAID) >/dev/null 2>&1) || echo "docs: npm could not fetch mermaid; the theme loads it from a CDN"; fi
	@if [ -f .cache/docs/mermaid-$(MERMAID).tgz ]; then tar -xzf .cache/docs/mermaid-$(MERMAID).tgz -O package/dist/mermaid.min.js > $@; fi

# --- the container lab (matrix/, images/, scripts/; see docs/guides/embedding.md) ------------------------------
LAB_VENV ?= .venv-lab
LAB_PY := $(LAB_VENV)/bin/python
DISTRO ?=
PYTHON_VERSION ?=
ARCH ?=
SUITES ?=
JOBS ?= auto
MATRIX_ARGS ?=

.PHONY: matrix matrix-publish lab-engine lab-browser lab-registry test-lab clean-lab

# The lab's host tools (pytest, pytest-testinfra, packaging) from the `lab` extra, without building mcpserver
# itself: matrix/venv.py, the same code scripts/run_matrix.py provisions itself with on a bare Python.
$(LAB_VENV)/.installed: pyproject.toml matrix/venv.py
	$(PYTHON) -m matrix.venv $(LAB_VENV) >/dev/null
	touch $@

lab-engine:
	@sh scripts/ensure_engine.sh

# make exits 2 on any failure and prints its own error last; the script's own exit code is on the line above,
# `run_matrix: exit N: ...` (CI: call the script directly).
matrix: $(LAB_VENV)/.installed lab-engine lab-browser  # the host cells run tests/http, whose CORS test needs Chromium
	$(LAB_PY) scripts/run_matrix.py --jobs $(JOBS) $(if $(DISTRO),--distro $(DISTRO)) $(if $(PYTHON_VERSION),--python $(PYTHON_VERSION)) $(if $(ARCH),--arch $(ARCH)) $(if $(SUITES),--suite $(SUITES)) $(MATRIX_ARGS)

# What the repository shows of the lab is written by a run (matrix/publish.py), never by hand.
matrix-publish:
	$(MAKE) matrix MATRIX_ARGS="$(MATRIX_ARGS) --publish"

test-lab: $(LAB_VENV)/.installed $(if $(ENGINE),lab-engine lab-browser lab-registry)
	$(LAB_PY) -m pytest -q -p no:cacheprovider tests/lab $(if $(ENGINE),,-m "not engine")

# Headless Chromium renders report.html in the lab's tests, and runs tests/http's CORS test (in make test and the host cells).
lab-browser:
	@command -v chromium >/dev/null 2>&1 || { echo "lab: installing chromium (apt-get) for the report test"; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; }

# Debian's docker-registry: the image store the travel tests start on 127.0.0.1 (tests/lab/machines.py).
lab-registry:
	@command -v docker-registry >/dev/null 2>&1 || { echo "lab: installing docker-registry (apt-get) for the travel tests"; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-registry >/dev/null 2>&1 \
	  || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-registry >/dev/null; }; }

clean-lab:
	@$(PYTHON) scripts/clean_lab.py

# --- benchmarks (bench/; see docs/reports/performance.md) -----------------------------------------------------------
# The peers (the official SDK, gunicorn) live in their own venv, from bench/requirements.txt;
# wrk comes from Debian's packages. The driver itself needs only the standard library.
BENCH_VENV ?= .cache/bench-venv
BENCH_PY := $(BENCH_VENV)/bin/python
ROUNDS ?= 7
BENCH_ARGS ?=

.PHONY: bench bench-tools bench-compare

$(BENCH_VENV)/.installed: bench/requirements.txt
	@echo "bench: creating $(BENCH_VENV) with bench/requirements.txt (the official SDK, gunicorn)"
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_PY) -m pip install --quiet -r bench/requirements.txt
	touch $@

bench-tools:  # wrk drives the concurrent HTTP rows; valgrind counts instructions (make bench and bench-compare)
	@for tool in wrk valgrind; do command -v $$tool >/dev/null 2>&1 || { echo "bench: installing $$tool (apt-get)"; \
	  export DEBIAN_FRONTEND=noninteractive; apt-get install -y -qq --no-install-recommends $$tool >/dev/null 2>&1 \
	  || { apt-get update -qq && apt-get install -y -qq --no-install-recommends $$tool >/dev/null; }; }; done

bench: $(BENCH_VENV)/.installed bench-tools
	$(PYTHON) bench/run.py --venv $(BENCH_VENV) --rounds $(ROUNDS) $(BENCH_ARGS)
	$(PYTHON) bench/task_roundtrip.py
	$(PYTHON) bench/task_store.py --no-postgres

# Two checkouts back to back, pair by pair, and in instructions where valgrind is installed (bench/compare.py):
# whether a change made mcpserver slower. BASE is a git revision (default HEAD: what the uncommitted change costs)
# or a folder with a mcpserver package.
BASE ?= HEAD
PAIRS ?= 15
bench-compare: bench-tools
	$(PYTHON) bench/compare.py --baseline $(BASE) --pairs $(PAIRS)

# --- fuzzing and soak (tests/fuzz/, bench/soak.py; see docs/reports/performance.md) ------------------------------
# `make test` runs a short fuzz run (tests/fuzz/test_fuzz.py); these are the full ones.
FUZZ_CORE ?= 1000000
FUZZ_STDIO ?= 100000
FUZZ_HTTP ?= 100000
FUZZ_LEGACY_STDIO ?= 20000
FUZZ_LEGACY_HTTP ?= 20000
FUZZ_ARGS ?=
SOAK_MINUTES ?= 10
SOAK_FAULTS ?=
SOAK_ARGS ?=

.PHONY: fuzz soak

fuzz: $(VENV)/.installed
	$(PY) tests/fuzz/fuzz.py --core $(FUZZ_CORE) --stdio $(FUZZ_STDIO) --http $(FUZZ_HTTP) \
	  --legacy-stdio $(FUZZ_LEGACY_STDIO) --legacy-http $(FUZZ_LEGACY_HTTP) $(FUZZ_ARGS)

soak: $(VENV)/.installed
	$(PY) bench/soak.py --minutes $(SOAK_MINUTES) $(if $(SOAK_FAULTS),--faults) $(SOAK_ARGS)
