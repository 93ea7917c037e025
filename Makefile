# bayesnotes project commands. Each target brings up .venv from nothing when it is missing
# (or when settings.ini/setup.py changed), then does its job.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# Small linear-algebra calls are much slower with multi-threaded BLAS on a busy 2-core machine
# (and the test run already uses both cores), so every target runs single-threaded BLAS.
export OMP_NUM_THREADS ?= 1
export OPENBLAS_NUM_THREADS ?= 1
export MKL_NUM_THREADS ?= 1
# pytest-xdist: two workers; --dist loadfile keeps each notebook's cells on one worker, in order.
TEST_ARGS ?= -n 2 --dist loadfile
# The book's environment: exact versions (transitive too) resolved by uv for every Python >= 3.11
# (`make lock` refreshes it). The package itself keeps version ranges in settings.ini for `pip install`.
BOOK_LOCK   := requirements/book.txt
# The declared minimums (settings.ini: min_python, requirements) resolved at their lowest, for `make test-oldest`,
# run with an interpreter of that minimum version (pyenv's, or OLDEST_PYTHON=/path/to/python).
OLDEST_LOCK := requirements/oldest.txt
MIN_PY      := $(shell sed -n "s/^min_python *= *//p" settings.ini)
OLDEST_PYTHON ?= $(shell for p in $(wildcard $(HOME)/.pyenv/versions/$(MIN_PY).*/bin/python$(MIN_PY)) python$(MIN_PY); do \
                    $$p -c "" 2>/dev/null && { echo $$p; break; }; done)
# tests/ files that need the documentation stack (nbdev, smalldocs), not only the library
DOC_TESTS := --ignore=tests/test_site.py --ignore=tests/test_readme.py --ignore=tests/test_nbdev_sync.py --ignore=tests/test_compat.py

.PHONY: help venv test test-reader test-slow test-arviz seed-sweep seed-sweep-long nb-margins test-latest test-oldest lock site serve figures export clean readme \
        test-browser test-jupyterlab site-weight tag-cells chromium

help:
	@echo "make test     run every test: tests/ and all notebooks (nbval), with timings"
	@echo "make test-reader  every notebook with a Colab/Binder link run as a reader's Colab runs it: a fresh venv with the lean package only"
	@echo "make site     export the package, execute the notebooks and build the website into _docs/"
	@echo "make serve    build the website and serve it on http://127.0.0.1:8000"
	@echo "make figures  regenerate every chapter's figures into figures/<chapter>/ (PNG and SVG)"
	@echo "make test-browser  build the website, then check it offline in headless Chromium (installs Debian's chromium)"
	@echo "make test-jupyterlab  every chapter in JupyterLab (headless Chromium): all cells run, every widget moved"
	@echo "make site-weight   page weight of the built website (_docs/): the heaviest pages and the total"
	@echo "make tag-cells     give the chapter notebooks their website cell options (tools/tag_cells.py; idempotent)"
	@echo "make export   nbdev_export + nbdev_clean + README after editing notebooks"
	@echo "make test-slow     the longer statistical checks (pytest -m slow), outside make test"
	@echo "make test-arviz    add the optional ArviZ extra (settings.ini: arviz_requirements) to .venv, then check to_arviz against ArviZ"
	@echo "make seed-sweep    rerun the statistical tests with every algorithm seed shifted, 20 offsets, table"
	@echo "make seed-sweep-long  the fast seeded tests (under 2 s each) over 200 offsets: rare failures, local optima"
	@echo "make nb-margins    run every notebook for SEED=0..19 and tabulate each assert's margin"
	@echo "make lock          re-resolve $(BOOK_LOCK) and $(OLDEST_LOCK) from settings.ini (uv)"
	@echo "make test-latest   the suite in .venv-latest with the newest versions settings.ini allows"
	@echo "make test-oldest   tests/ in .venv-oldest with Python $(MIN_PY) and the oldest declared versions"

$(STAMP): settings.ini setup.py $(BOOK_LOCK)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -r $(BOOK_LOCK)
	$(PY) -m pip install --quiet --no-deps -e .
	@touch $(STAMP)

venv: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest $(TEST_ARGS) --durations=15 tests nbs

# A reader's Colab or Binder: a fresh venv with only the lean package (installed from this clone as `pip install .`),
# ipykernel, ipywidgets and matplotlib, at the lock's versions; every notebook with launch links runs in it, alone in an
# empty directory (tools/run_reader.py). CI runs it after `make test`.
READER_VENV := .venv-reader
test-reader: $(STAMP)
	rm -rf $(READER_VENV) build
	$(PYTHON) -m venv $(READER_VENV)
	$(READER_VENV)/bin/python -m pip install --quiet -c $(BOOK_LOCK) . ipykernel ipywidgets matplotlib
	rm -rf build
	$(PY) tools/run_reader.py --python $(abspath $(READER_VENV))/bin/python

test-slow: $(STAMP)
	$(PY) -m pytest -n 2 -m slow tests

# ArviZ is an optional extra (settings.ini: arviz_requirements = arviz>=0.21,<1), not in the locked environment: this
# adds it to .venv (it stays there: `make test` then runs the ArviZ comparisons too; rebuild .venv to drop it)
test-arviz: $(STAMP)
	$(PY) -m pip install --quiet $$(sed -n 's/^arviz_requirements *= *//p' settings.ini)
	$(PY) -m pytest -p no:xdist tests/test_arviz.py tests/test_workflow_arviz.py nbs/04b_diagnostics.ipynb

seed-sweep: $(STAMP)
	$(PY) tools/seed_sweep.py --offsets 20 -n 2

# The fast statistical tests (seeded, under 2 s each at the first offset) over 200 offsets: rare failures such as a
# local optimum reached from one start in a hundred (tools/seed_sweep.py --fast-under).
seed-sweep-long: $(STAMP)
	$(PY) tools/seed_sweep.py --offsets 200 --fast-under 2 -n 2

nb-margins: $(STAMP)
	$(PY) tools/nb_margins.py --seeds 20 -j 2

# Resolving needs uv, kept in its own small venv so that it never enters the book's environment.
.venv-lock/bin/uv:
	$(PYTHON) -m venv .venv-lock
	.venv-lock/bin/python -m pip install --quiet uv

lock: .venv-lock/bin/uv
	$(PYTHON) tools/lock.py book | .venv-lock/bin/uv pip compile --quiet --universal --python-version 3.11 \
	    --no-header --annotation-style line - -o $(BOOK_LOCK)
	@test -n "$(OLDEST_PYTHON)" || { echo "make lock: no Python $(MIN_PY) for $(OLDEST_LOCK); set OLDEST_PYTHON"; exit 1; }
	$(PYTHON) tools/lock.py oldest | .venv-lock/bin/uv pip compile --quiet --resolution lowest-direct \
	    --python $(OLDEST_PYTHON) --no-header --annotation-style line - -o $(OLDEST_LOCK)

test-latest:
	rm -rf .venv-latest
	$(PYTHON) -m venv .venv-latest
	.venv-latest/bin/python -m pip install --quiet --upgrade --upgrade-strategy eager -e ".[dev]"
	.venv-latest/bin/python -m pip list --format=freeze > .venv-latest/versions.txt
	.venv-latest/bin/python -m pytest $(TEST_ARGS) tests nbs

test-oldest:
	@test -n "$(OLDEST_PYTHON)" || { echo "make test-oldest needs Python $(MIN_PY): make test-oldest OLDEST_PYTHON=/path/to/python$(MIN_PY)"; exit 1; }
	rm -rf .venv-oldest
	$(OLDEST_PYTHON) -m venv .venv-oldest
	.venv-oldest/bin/python -m pip install --quiet -r $(OLDEST_LOCK)
	.venv-oldest/bin/python -m pip install --quiet --no-deps -e .
	.venv-oldest/bin/python -m pytest -o addopts="-p no:cacheprovider" -m "not slow" -n 2 $(DOC_TESTS) tests

site: $(STAMP)
	$(PY) tools/build_site.py

serve: $(STAMP)
	$(PY) tools/build_site.py --serve

# The browser test drives Debian's chromium with Playwright (never `playwright install`): installed with apt when
# missing (as root, or with sudo); without it the tests are skipped and say why.
CHROMIUM ?= /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

chromium:
	@test -x $(CHROMIUM) || command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium for the browser test"; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium \
	  || echo "could not install chromium: the browser tests will be skipped"; }

test-browser: $(STAMP) chromium
	$(PY) tools/build_site.py
	BAYESNOTES_SITE=$(shell sed -n "s/^doc_path *= *//p" settings.ini) $(PY) -m pytest -p no:xdist -m browser -v tests/test_browser.py

test-jupyterlab: $(STAMP) chromium
	$(PY) -m pytest -p no:xdist -m jupyterlab -v -s tests/test_jupyterlab.py

site-weight: $(STAMP)
	$(PY) tools/site_weight.py $(shell sed -n "s/^doc_path *= *//p" settings.ini)

tag-cells: $(STAMP)
	$(PY) tools/tag_cells.py
	$(VENV)/bin/nbdev_clean

figures: $(STAMP)
	$(PY) tools/make_figures.py

export: $(STAMP)
	$(VENV)/bin/nbdev_export
	$(VENV)/bin/nbdev_clean
	$(PY) tools/make_readme.py

readme: $(STAMP)
	$(PY) tools/make_readme.py

clean:
	rm -rf _docs _proc _build figures .pytest_cache .venv-latest .venv-oldest .venv-lock .venv-reader
