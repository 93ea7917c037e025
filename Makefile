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

.PHONY: help venv test site serve figures export clean readme

help:
	@echo "make test     run every test: tests/ and all notebooks (nbval), with timings"
	@echo "make site     export the package, execute the notebooks and build the website into _docs/"
	@echo "make serve    build the website and serve it on http://127.0.0.1:8000"
	@echo "make figures  regenerate every chapter's figures into figures/<chapter>/ (PNG and SVG)"
	@echo "make export   nbdev_export + nbdev_clean + README after editing notebooks"

$(STAMP): settings.ini setup.py
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	@touch $(STAMP)

venv: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest $(TEST_ARGS) --durations=15 tests nbs

site: $(STAMP)
	$(PY) tools/build_site.py

serve: $(STAMP)
	$(PY) tools/build_site.py --serve

figures: $(STAMP)
	$(PY) tools/make_figures.py

export: $(STAMP)
	$(VENV)/bin/nbdev_export
	$(VENV)/bin/nbdev_clean
	$(PY) tools/make_readme.py

readme: $(STAMP)
	$(PY) tools/make_readme.py

clean:
	rm -rf _docs _proc _build figures .pytest_cache
