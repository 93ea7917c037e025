"""Shared pytest configuration for tests/ and for the notebooks run by nbval.

* Figures never open windows: the Agg backend is forced for this process and for notebook kernels.
* nbdev_clean strips execution counts, and nbval treats a cell with no execution count as "unrun":
  it refuses one that still has stored outputs and never compares its output. We give every code cell
  of a collected notebook a synthetic execution count, so a notebook saved with outputs runs, and a
  cell tagged NBVAL_CHECK_OUTPUT is compared as intended.
* At the end, the time spent in each notebook (and in each test file) is printed, summed over its
  cells, also when the run is split over pytest-xdist workers.
"""
import os
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("MPLBACKEND", "Agg")      # inherited by the nbval kernels
# Two pytest-xdist workers on two cores: BLAS threads would only oversubscribe the CPUs (inherited by kernels).
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")

ROOT = Path(__file__).resolve().parents[1]


def pytest_collection_modifyitems(session, config, items):
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
