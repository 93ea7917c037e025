"""Shared pytest configuration for tests/ and for the notebooks run by nbval.

* Figures never open windows: the Agg backend is forced for this process and for notebook kernels.
* nbdev_clean strips execution counts, and nbval treats a cell with no execution count as "unrun":
  it refuses one that still has stored outputs and never compares its output. We give every code cell
  of a collected notebook a synthetic execution count, so a notebook saved with outputs runs, and a
  cell tagged NBVAL_CHECK_OUTPUT is compared as intended.
* At the end, the time spent in each notebook (and in each test file) is printed, summed over its
  cells, also when the run is split over pytest-xdist workers.
* Seeds. A seed is not a result: another CPU's BLAS rounds differently and sends a seeded chain elsewhere, so
  every statistical check must hold for almost every seed. Seeds that *drive an algorithm* (samplers,
  optimisers, estimators, particle filters, and the simulated data of a statistical experiment) come from the
  `seed` fixture: `seed(k)` is `k + offset`, where `pytest --seed-offset K` sets the offset (default 0).
  The offset is also exported as `BAYESNOTES_SEED` to the notebook kernels run by nbval, where every
  algorithm seed is written `SEED + k`. Seeds that only *define a worked example's data* stay literal;
  assertions on them are about that data set's exact, computed answer. `make seed-sweep` reruns the
  statistical tests for 20 offsets (tools/seed_sweep.py).
* With `--list-seeded FILE` the node ids of the tests that use the `seed` fixture (directly or through another
  fixture) are written to FILE at collection: the ones a seed sweep needs to rerun.
* With `--record-margins DIR` (used by the sweep) every `assert` in tests/ also records its margin (how far
  the statistic is from its bound) into DIR, see tools/margins.py.
"""
import os
from collections import defaultdict
from pathlib import Path

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")      # inherited by the nbval kernels
# Two pytest-xdist workers on two cores: BLAS threads would only oversubscribe the CPUs (inherited by kernels).
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")

ROOT = Path(__file__).resolve().parents[1]


def pytest_addoption(parser):
    parser.addoption("--seed-offset", type=int, default=None,
                     help="shift every algorithm seed of tests/ and notebooks by K (default: $BAYESNOTES_SEED or 0)")
    parser.addoption("--record-margins", default=None, metavar="DIR",
                     help="record the margin of every assert in tests/ into DIR (tools/margins.py)")
    parser.addoption("--list-seeded", default=None, metavar="FILE",
                     help="write the node ids of the collected tests that use the `seed` fixture into FILE, one a line "
                          "(tools/seed_sweep.py: only these change with the offset)")


def _seed_offset(config):
    off = config.getoption("seed_offset")
    return int(os.environ.get("BAYESNOTES_SEED", 0)) if off is None else off


def pytest_configure(config):
    # notebooks executed by nbval read their algorithm seeds from this variable (`SEED = ...` in each chapter)
    os.environ["BAYESNOTES_SEED"] = str(_seed_offset(config))
    if config.getoption("record_margins"):
        import sys
        sys.path.insert(0, str(ROOT / "tools"))
        import margins
        config.pluginmanager.register(margins.install_pytest(config.getoption("record_margins")), "margins")


@pytest.fixture(scope="session")
def seed(request):
    """`seed(k)` -> the k-th algorithm seed of a test: `k + offset`, the offset set by `--seed-offset`."""
    off = _seed_offset(request.config)

    def seed(k: int = 0) -> int:
        return int(k) + off
    return seed


def pytest_collection_modifyitems(session, config, items):
    listing = config.getoption("list_seeded", None)
    if listing:    # tests whose random numbers move with --seed-offset (directly or through another fixture)
        Path(listing).write_text("".join(f"{it.nodeid}\n" for it in items if "seed" in getattr(it, "fixturenames", ())))
    count = 0
    for item in items:
        cell = getattr(item, "cell", None)
        if cell is not None and getattr(cell, "cell_type", None) == "code" and cell.get("execution_count") is None:
            count += 1
            cell["execution_count"] = count


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    per_file = defaultdict(float)
    for reports in terminalreporter.stats.values():
        for rep in reports:
            if getattr(rep, "when", None) != "call" or not hasattr(rep, "nodeid"):
                continue
            per_file[rep.nodeid.split("::", 1)[0]] += getattr(rep, "duration", 0.0)
    if not per_file:
        return
    nbs = {f: t for f, t in per_file.items() if f.endswith(".ipynb")}
    tests = {f: t for f, t in per_file.items() if not f.endswith(".ipynb")}
    tr = terminalreporter
    for title, group in (("notebook execution times", nbs), ("test file times", tests)):
        if not group:
            continue
        tr.write_sep("=", f"{title} (sum over cells/tests, seconds)")
        for f, t in sorted(group.items(), key=lambda kv: -kv[1]):
            tr.write_line(f"{t:8.1f}  {f}")
        tr.write_line(f"{sum(group.values()):8.1f}  total")
