# sqlq: `make` lists the targets.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed

.DEFAULT_GOAL := help
.PHONY: help dev demo release-check test test-unit test-integration test-system test-fast test-min test-pooled test-chaos lint typecheck schema check bench bench-scale bench-quick \
	docs dist-check clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-16s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	@touch $@

dev: $(STAMP)  ## create .venv with sqlq (editable) and the test extras

# The docs site's tools too (the test of the built site needs mkdocs): make docs, make test.
DOCS_STAMP := $(VENV)/.docs-installed

$(DOCS_STAMP): $(STAMP) pyproject.toml
	$(BIN)/pip install -q -e '.[test,docs]'
	@touch $@

# The demo's own venv: sqlq and its runtime dependencies only (about 40 MB), none of the
# test toolchain of .venv. Made without pip inside it (pip --python installs into it), which
# saves seeding a pip into a venv nobody installs into; a Python without pip seeds one.
DEMO_VENV  := .venv-demo
DEMO_STAMP := $(DEMO_VENV)/.installed

$(DEMO_STAMP): pyproject.toml
	rm -rf $(DEMO_VENV)
	@if $(PY) -m pip --python $(PY) --version >/dev/null 2>&1; then \
		$(PY) -m venv --without-pip $(DEMO_VENV) && \
		$(PY) -m pip --python $(DEMO_VENV)/bin/python install -q --no-compile --disable-pip-version-check -e .; \
	else \
		$(PY) -m venv $(DEMO_VENV) && $(DEMO_VENV)/bin/pip install -q -e .; \
	fi
	@touch $@

demo:  ## producers and workers in several processes on demo/demo.db (its own small venv)
	@start=$$(date +%s%N); \
	$(MAKE) --no-print-directory $(DEMO_STAMP) || exit 1; \
	$(DEMO_VENV)/bin/python -m sqlq.demo demo/demo.db || exit 1; \
	ms=$$(( ($$(date +%s%N) - start) / 1000000 )); \
	printf 'make demo: %d.%d s, its venv included\n' $$((ms / 1000)) $$((ms % 1000 / 100))

# The suite runs in TEST_WORKERS processes (pytest-xdist): most tests wait on processes,
# fsyncs and sockets, so more workers than cores still pay. Measured on CI's 2 cores
# (fresh clones, nothing else running): 2 workers 12m57s, 3 workers 9m54s (f6ce39d);
# with one database per test process reset between tests, 3 workers 10m19s (load ~1.3:
# the cores half idle) and 5 workers 5m05s (2e41288), all green.
TEST_WORKERS ?= 5

# The suite starts a few thousand Python processes (workers, the CLI, servers). On a
# machine that sets PYTHONDONTWRITEBYTECODE each would compile sqlq anew (60-300 ms of CPU
# each: a quarter of the CPU of the CLI tests) and each test process would rewrite every
# test module's asserts anew (7 s each): bytecode is cached for what make runs.
unexport PYTHONDONTWRITEBYTECODE
# A collection first writes the rewritten test modules, which the test processes then
# read (5 processes rewriting at once cost ~40 s of CPU); its errors show in the run. Two
# collections, of halves of the suite, one per core: 5.0 s on a fresh clone, 8.4 s as one.
COLLECT = $(BIN)/python -m pytest -q -p no:cacheprovider --collect-only
PREWARM = { $(COLLECT) tests/unit & $(COLLECT) tests/integration tests/system; wait; } >/dev/null 2>&1

# Tests go to the processes one at a time as each finishes one, the slow ones first
# (tests/conftest.py): xdist's default hands each process a quarter of its share at once,
# in collection order, and a process handed the slow ones ran them alone for minutes.
# The tests of an xdist_group (the browser's, the docs site's) go to one process, which
# starts what their module-scoped fixtures share once (9m19s before, 7m39s after).
SCHEDULE = --dist loadgroup

# Runs a command and prints how long it took (wall clock), keeping its exit status.
TIMED = .ci/timed

# -rs: a test that skips says why (none does in CI but the two of Python 3.12's sqlite3).
test: $(DOCS_STAMP)  ## the whole suite (short chaos and power-cut runs included), timed; installs Debian test deps as root
	@.ci/install-test-deps
	$(TIMED) "make test ($(TEST_WORKERS) workers)" sh -c '$(PREWARM); \
		exec $(BIN)/python -m pytest -q -rs -p no:cacheprovider -n $(TEST_WORKERS) $(SCHEDULE) --durations=25' 

test-unit: $(STAMP)  ## in-process tests on real databases (tests/unit, ~1 min on idle cores)
	$(TIMED) "make test-unit" $(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) $(SCHEDULE) tests/unit

test-integration: $(STAMP)  ## real processes, sockets and servers (tests/integration)
	$(TIMED) "make test-integration" $(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) $(SCHEDULE) tests/integration

test-system: $(DOCS_STAMP)  ## the product as users run it: chaos, power cuts, browser, examples (tests/system)
	@.ci/install-test-deps
	$(TIMED) "make test-system" $(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) $(SCHEDULE) tests/system

test-fast: $(DOCS_STAMP)  ## the suite without the tests marked slow (over ~2 s each): about half the time of make test
	$(TIMED) "make test-fast" $(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) $(SCHEDULE) -m "not slow"

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

# PostgreSQL's semantics tests and its chaos run through Debian's PgBouncer, in each pool mode
# (tests/conftest.py: SQLQ_TEST_PG_POOL sends every PostgreSQL db_url through it).
POOLED_TESTS := $(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) $(SCHEDULE) tests/unit \
	tests/system/test_chaos.py -k "postgres"

test-pooled: $(STAMP)  ## PostgreSQL's unit tests and chaos run through PgBouncer, transaction then session mode
	@.ci/install-test-deps
	SQLQ_TEST_PG_POOL=transaction $(TIMED) "make test-pooled (transaction)" $(POOLED_TESTS)
	SQLQ_TEST_PG_POOL=session $(TIMED) "make test-pooled (session)" $(POOLED_TESTS)

test-chaos: $(STAMP)  ## long chaos and power-cut runs (about two minutes)
	SQLQ_CHAOS_SECONDS=60 SQLQ_POWERCUT_POINTS=1000 $(BIN)/python -m pytest -q -p no:cacheprovider -s tests/system/test_chaos.py tests/system/test_powercut.py

lint: $(STAMP)  ## ruff
	$(BIN)/ruff check sqlq tests bench migrations

typecheck: $(STAMP)  ## mypy --strict on sqlq/
	$(BIN)/mypy

schema: $(STAMP)  ## rewrite migrations/<dialect>/schema.sql from the migrations (after adding one)
	PYTHONPATH=. $(BIN)/python migrations/generate.py

check: lint typecheck test  ## everything CI cares about

bench: $(STAMP)  ## sqlq against its peers (PostgreSQL ones too) and issue 12's rows: bench/RESULTS.md, docs/performance.md's figures; ~25 min; BENCH_ARGS=--help
	$(BIN)/python bench/run.py $(BENCH_ARGS)

bench-scale: $(STAMP)  ## issue 39's big-queue figures at 10k jobs, both backends (bench/bench_scale.py; the 1M/10M run: docs/performance.md)
	$(BIN)/python bench/bench_scale.py --sizes 10000 $(BENCH_ARGS)

bench-quick: $(STAMP)  ## a five-minute version of make bench (bench/.work/quick/)
	$(BIN)/python bench/run.py --quick $(BENCH_ARGS)

docs: $(DOCS_STAMP)  ## build the documentation site into site/ (mkdocs --strict), check it
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict -q
	SQLQ_DOCS_SITE=site $(BIN)/python -m pytest -q -p no:cacheprovider tests/system/test_docs_site.py

# The release tools (the `release` extra: build, twine, check-wheel-contents) in a venv of
# their own; .ci/release_check.py makes its own fresh venvs for the wheels it installs.
RELEASE_VENV  := .venv-release
RELEASE_STAMP := $(RELEASE_VENV)/.installed

$(RELEASE_STAMP): pyproject.toml
	rm -rf $(RELEASE_VENV) && $(PY) -m venv $(RELEASE_VENV)
	$(RELEASE_VENV)/bin/pip install -q --disable-pip-version-check '.[release]'
	@touch $@

release-check: $(RELEASE_STAMP)  ## sdist + wheels as PyPI checks them, each installed outside the checkout and run on SQLite and PostgreSQL
	@start=$$(date +%s%N); \
	$(RELEASE_VENV)/bin/python .ci/release_check.py || exit 1; \
	ms=$$(( ($$(date +%s%N) - start) / 1000000 )); \
	printf 'make release-check: %d.%d s\n' $$((ms / 1000)) $$((ms % 1000 / 100))

dist-check: release-check  ## the same as release-check (its old name)

clean:  ## remove the venvs, caches and demo files
	rm -rf $(VENV) $(DEMO_VENV) $(RELEASE_VENV) .venv-bench .venv-min demo dist build site .pytest_cache .mypy_cache .ruff_cache .hypothesis
