# sqlq: `make` lists the targets.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed

.DEFAULT_GOAL := help
.PHONY: help dev demo test test-fast test-chaos lint typecheck check bench bench-quick dist-check clean

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

test: $(STAMP)  ## the whole suite (short chaos and power-cut runs included)
	$(BIN)/python -m pytest -q -p no:cacheprovider

test-fast: $(STAMP)  ## the suite without slow tests
	$(BIN)/python -m pytest -q -p no:cacheprovider -m "not slow"

test-chaos: $(STAMP)  ## long chaos and power-cut runs (about two minutes)
	SQLQ_CHAOS_SECONDS=60 SQLQ_POWERCUT_POINTS=1000 $(BIN)/python -m pytest -q -p no:cacheprovider -s tests/test_chaos.py tests/test_powercut.py

lint: $(STAMP)  ## ruff
	$(BIN)/ruff check sqlq tests bench

typecheck: $(STAMP)  ## mypy --strict on sqlq/
	$(BIN)/mypy

check: lint typecheck test  ## everything CI cares about

bench: $(STAMP)  ## sqlq against its peers, one table (bench/RESULTS.md), ~15 min; BENCH_ARGS=--help
	$(BIN)/python bench/run.py $(BENCH_ARGS)

bench-quick: $(STAMP)  ## a one-minute version of make bench (bench/.work/quick/)
	$(BIN)/python bench/run.py --quick $(BENCH_ARGS)

dist-check: $(STAMP)  ## build the wheel and check it ships the migrations and dashboard assets
	rm -rf dist && $(BIN)/pip wheel -q --no-deps -w dist .
	$(BIN)/python -c "import zipfile,glob,sys; n=zipfile.ZipFile(glob.glob('dist/*.whl')[0]).namelist(); m=[x for x in n if x.startswith('sqlq/migrations/') and x.endswith('.sql')]; a=[x for x in n if x.startswith('sqlq/dashboard/') and x.endswith(('.html','.css','.js','.svg'))]; print('\n'.join(m+a)); sys.exit(0 if m and 'sqlq/dashboard/static/dashboard.js' in a and 'sqlq/dashboard/templates/overview.html' in a else 1)"

clean:  ## remove the venvs, caches and demo files
	rm -rf $(VENV) .venv-bench demo dist build .pytest_cache .mypy_cache .ruff_cache .hypothesis
