"""Long-run references the book compares against, generated here and shipped in bayesnotes/data with provenance.

    python tools/make_references.py            # list the references
    python tools/make_references.py NAME       # regenerate one (e.g. bnn_toy_nuts), minutes to an hour

A reference must earn the word: its diagnostics are computed on exactly what the book compares (here f(x) on the
plotted grid) and must meet the bar (rank-normalised R-hat < 1.01, bulk ESS >= 400, no divergences, tree depth
not saturated) before the file is written; `tests/test_references.py` checks the stored file still meets it and
that a short fresh run agrees with it. Each entry records its settings, seed, library versions, git commit,
diagnostics and CPU time inside the file.
"""
import argparse
import importlib.metadata
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BAR = {"max R-hat": 1.01, "min ESS": 400, "max fraction at the depth cap": 0.1}


def _versions():
    import autograd
    import numpy
    import scipy
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain", "bayesnotes", "nbs"], cwd=ROOT,
                                capture_output=True, text=True).stdout.strip())
    return {"python": platform.python_version(), "numpy": numpy.__version__, "scipy": scipy.__version__,
            "autograd": importlib.metadata.version("autograd"), "machine": platform.machine(),
            "bayesnotes commit": commit + (" (with uncommitted changes)" if dirty else "")}


def meets_bar(d):
    "Why a reference's diagnostics miss the bar (empty list: it meets it)."
    problems = []
    if max(d["max R-hat f(x)"], d["max R-hat (f - mean)^2"]) >= BAR["max R-hat"]:
        problems.append("R-hat >= 1.01")
    if min(d["min bulk ESS f(x)"], d["min tail ESS f(x)"], d["min bulk ESS (f - mean)^2"]) < BAR["min ESS"]:
        problems.append("ESS < 400")
    if d["divergences"]:
        problems.append("divergences")
    if d["fraction at the depth cap"] > BAR["max fraction at the depth cap"]:
        problems.append("tree depth saturated")
    return problems


def bnn_toy_nuts():
    from bayesnotes import bnn
    t_cpu, t_wall = time.process_time(), time.time()
    fit = bnn.nuts_reference(recompute=True, progress=True)
    cpu, wall = time.process_time() - t_cpu, time.time() - t_wall
    diag = bnn.reference_diagnostics(fit)
    provenance = {"what": "NUTS posterior of the 10-unit toy BNN on the 20-point data set (toy_regression_data(20, 0))",
                  "generator": "python tools/make_references.py bnn_toy_nuts",
                  "settings": {**bnn.BNN_REFERENCE_RUN, **{k: (list(v) if isinstance(v, tuple) else v)
                                                          for k, v in bnn.TOY_MODEL.items() if k != "hidden"},
                               "hidden": [10], "init": "anchored-ensemble members (nuts_regression default)"},
                  "seed": bnn.BNN_REFERENCE_SEED, "cpu_seconds": round(cpu, 1), "wall_seconds": round(wall, 1),
                  "step_size": [float(s) for s in getattr(fit.result, "step_size", [])],
                  "diagnostics": diag, "diagnostics_on": "f(x) at BNN_REFERENCE_GRID (300 points on [-2, 2])",
                  "versions": _versions(), "created": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    return fit, provenance, lambda path: bnn.save_nuts_reference(fit, path, provenance), bnn.BNN_REFERENCE_FILE


REFERENCES = {"bnn_toy_nuts": bnn_toy_nuts}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("name", nargs="?", choices=sorted(REFERENCES))
    ap.add_argument("--force", action="store_true", help="write the file even if the bar is missed")
    args = ap.parse_args(argv)
    if not args.name:
        print("references:", ", ".join(sorted(REFERENCES)))
        return 0
    fit, provenance, save, filename = REFERENCES[args.name]()
    print(json.dumps(provenance, indent=1))
    problems = meets_bar(provenance["diagnostics"])
    if problems and not args.force:
        print("NOT written: the run misses the bar:", ", ".join(problems))
        return 1
    path = ROOT / "bayesnotes" / "data" / filename
    save(path)
    print(f"wrote {path.relative_to(ROOT)} ({path.stat().st_size / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
