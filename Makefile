# sqlq: `make` lists the targets.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed

.DEFAULT_GOAL := help
.PHONY: help dev demo test test-unit test-integration test-system test-fast test-min test-chaos lint typecheck check bench bench-quick \
	docs dist-check clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	@touch $@

dev: $(STAMP)  ## create .venv with sqlq (editable) and the test extras

demo: $(STAMP)  ## producers and workers in several processes on demo/demo.db
	$(BIN)/python -m sqlq.demo demo/demo.db

# The suite runs in TEST_WORKERS processes (pytest-xdist): most tests wait on processes,
# fsyncs and sockets, so more workers than cores still pay. Measured on CI's 2 cores
# (fresh clones of the same commit, nothing else running): 2 workers 12m57s, 3 workers
# 9m54s, both green.
TEST_WORKERS ?= 3

# Runs a command and prints how long it took (wall clock), keeping its exit status.
TIMED = .ci/timed

test: $(STAMP)  ## the whole suite (short chaos and power-cut runs included), timed; installs Debian test deps as root
	@.ci/install-test-deps
	$(TIMED) "make test ($(TEST_WORKERS) workers)" $(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --durations=25

test-unit: $(STAMP)  ## in-process tests on real databases (tests/unit, about a minute)
	$(TIMED) "make test-unit" $(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) tests/unit

test-integration: $(STAMP)  ## real processes, sockets and servers (tests/integration)
	$(TIMED) "make test-integration" $(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) tests/integration

test-system: $(STAMP)  ## the product as users run it: chaos, power cuts, browser, examples (tests/system)
	@.ci/install-test-deps
	$(TIMED) "make test-system" $(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) tests/system

test-fast: $(STAMP)  ## the suite without the tests marked slow (over ~2 s each): about half the time of make test
	$(TIMED) "make test-fast" $(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) -m "not slow"

# The fast, in-process tests, chosen by module name (-k matches modules wherever they live).
MIN_TESTS := test_lifecycle or test_tasks or test_topics or test_results or test_transactions \
	or test_migrations or test_argument_types or test_empty_tubes or test_cli or test_wakeup \
	or test_periodic or test_schema or test_django or test_flask

test-min:  ## the fast tests with every dependency at its lowest allowed version (.venv-min)
	rm -rf .venv-min && $(PY) -m venv .venv-min
	$(PY) .ci/min_requirements.py > .venv-min/floors.txt
	.venv-min/bin/pip install -q -r .venv-min/floors.txt
	.venv-min/bin/pip install -q -c .venv-min/floors.txt -e '.[test]'
	.venv-min/bin/python .ci/min_requirements.py --check
	.venv-min/bin/python -m pytest -q -p no:cacheprovider -m "not slow" -k "$(MIN_TESTS)"

test-chaos: $(STAMP)  ## long chaos and power-cut runs (about two minutes)
	SQLQ_CHAOS_SECONDS=60 SQLQ_POWERCUT_POINTS=1000 $(BIN)/python -m pytest -q -p no:cacheprovider -s tests/system/test_chaos.py tests/system/test_powercut.py

lint: $(STAMP)  ## ruff
	$(BIN)/ruff check sqlq tests bench

typecheck: $(STAMP)  ## mypy --strict on sqlq/
	$(BIN)/mypy

check: lint typecheck test  ## everything CI cares about

bench: $(STAMP)  ## sqlq against its peers (PostgreSQL ones too) and issue 12's rows: bench/RESULTS.md, docs/performance.md's figures; ~25 min; BENCH_ARGS=--help
	$(BIN)/python bench/run.py $(BENCH_ARGS)

bench-quick: $(STAMP)  ## a five-minute version of make bench (bench/.work/quick/)
	$(BIN)/python bench/run.py --quick $(BENCH_ARGS)

DOCS_STAMP := $(VENV)/.docs-installed

$(DOCS_STAMP): $(STAMP) pyproject.toml
	$(BIN)/pip install -q -e '.[test,docs]'
	@touch $@

docs: $(DOCS_STAMP)  ## build the documentation site into site/ (mkdocs --strict), check it
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict -q
	SQLQ_DOCS_SITE=site $(BIN)/python -m pytest -q -p no:cacheprovider tests/system/test_docs_site.py

dist-check: $(STAMP)  ## build the wheel, check it ships the migrations and dashboard assets, install it
	rm -rf dist && $(BIN)/pip wheel -q --no-deps -w dist .
	$(BIN)/python .ci/dist_check.py
	rm -rf dist/venv && $(PY) -m venv dist/venv && dist/venv/bin/pip install -q dist/*.whl
	dist/venv/bin/pip show sqlq-jobs | grep -E '^(Name|Version):'
	dist/venv/bin/sqlq --help | grep -q 'sqlq' && echo 'sqlq --help: ok'
	dist/venv/bin/sqlq-beanstalkd -v
	cd dist && venv/bin/sqlq --db check.db put hello && venv/bin/sqlq --db check.db reserve --id-only

clean:  ## remove the venvs, caches and demo files
	rm -rf $(VENV) .venv-bench .venv-min demo dist build site .pytest_cache .mypy_cache .ruff_cache .hypothesis
