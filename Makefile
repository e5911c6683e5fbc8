# Two entry points, each creating or reusing the local virtual environment .venv:
#   make demo   the main job      make test   the test suite without its slow tier, then the documentation build
# and make test-all: every test (the slow tier too), then the documentation build
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# the real data beside the project (CI and developers); elsewhere the loader downloads into the user cache
export DASKGP_DATA ?= $(if $(wildcard ../shared/data),$(abspath ../shared/data),)
# a relative DASKGP_DATA (e.g. ../shared/data) made absolute from the project root: tests run commands in
# other folders, where a relative path would name nothing
override DASKGP_DATA := $(if $(DASKGP_DATA),$(abspath $(DASKGP_DATA)),)

.PHONY: demo test test-all durations lint bench clean browser hosts docs

$(STAMP): pyproject.toml
	@test -x $(PY) || "$$(.ci/find-python)" -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	@touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/daskgp sample --data concrete --target-ess 400 --out demo-run.zarr --overwrite

# Debian's Chromium for the dashboard's browser test (Playwright drives it; no browser download). Under CI
# (CI set, as .ci/run sets it) a failed install fails the run; a developer's machine skips that one test.
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	    || { if [ -n "$$CI" ]; then echo "could not install chromium, which CI needs" >&2; exit 1; fi; \
	         echo "could not install chromium: the browser test will be skipped"; }; }

# iproute2 (ip, tc) for the multi-host tests, which make network namespaces (tests/multihost; CI runs as root):
# a missing one fails CI, and those tests fail rather than skip without it
hosts:
	@command -v ip >/dev/null 2>&1 && command -v tc >/dev/null 2>&1 || \
	  { (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 >/dev/null) \
	    || { if [ -n "$$CI" ]; then echo "could not install iproute2, which CI needs" >&2; exit 1; fi; \
	         echo "could not install iproute2: the multi-host tests will fail"; }; }

# the browser test alone, after the rest: its 5-second waits on the page are for a machine not loaded twice over
BROWSER_TEST := tests/interface/test_dashboard_browser.py::test_dashboard_end_to_end_in_chromium

# single-threaded BLAS in the two test processes: each shares CI's 2 cores with the other and with its
# cluster's workers (already single-threaded), and multithreaded OpenBLAS spinning on busy cores slowed
# every test that waits on a cluster or a child process: a fresh-clone .ci/run took 70 min, now 29
SERIAL_BLAS := OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1

# Two pytest processes (pytest-xdist), whole files to a process (a file's module fixtures, its clusters, are
# started once); tests/conftest.py hands out the files longest first by their measured seconds
# (tests/durations.json) and a file only when a process is down to its last test.
PYTEST := $(SERIAL_BLAS) $(PY) -m pytest -q --durations=15 -n 2 --dist loadfile --deselect $(BROWSER_TEST)

# every module's correctness tests and negative controls, one real-data fit per family, one fault-injection
# and one multi-host case, the browser smoke test and the docs; the tests marked slow are left to test-all
test: $(STAMP) browser hosts
	$(PYTEST) -m "not slow"
	$(PY) -m pytest -q $(BROWSER_TEST)
	$(MAKE) docs

# every test
test-all: $(STAMP) browser hosts
	$(PYTEST)
	$(PY) -m pytest -q $(BROWSER_TEST)
	$(MAKE) docs

# measure every test again and write tests/durations.json (what the scheduling above reads; commit it)
durations: $(STAMP) browser hosts
	$(PYTEST) --write-durations tests/durations.json

# the documentation site (docs/): HTML and the pages' doctests, warnings as errors
docs: $(STAMP)
	$(PY) -m sphinx -E -W --keep-going -q -b html docs docs/_build/html
	$(PY) -m sphinx -E -W --keep-going -q -b doctest docs docs/_build/doctest

lint: $(STAMP)
	$(VENV)/bin/ruff check daskgp tests benchmarks apps

bench: $(STAMP)
	$(PY) benchmarks/exact_gradient.py
	$(PY) benchmarks/cmvp_memory.py
	$(PY) benchmarks/sgld_concrete.py
	$(PY) benchmarks/sgld_house8l.py
	$(PY) benchmarks/sgpr_flights.py
	$(PY) benchmarks/run_store.py
	$(PY) benchmarks/fidelity.py

clean:
	rm -rf $(VENV) .pytest_cache
