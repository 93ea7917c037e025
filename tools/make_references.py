"""Long-run references the book compares against, generated here and shipped in bayesnotes/data with provenance.

    python tools/make_references.py                  # list the references and the bar each must meet
    python tools/make_references.py NAME             # regenerate one (e.g. bnn_toy_nuts): minutes to an hour
    python tools/make_references.py NAME --out F     # write to F instead of bayesnotes/data (a trial run)

A reference must earn the word: its diagnostics are computed on exactly what the book compares (for the BNN: f(x)
on the inputs of the chapter's figure and distance table) and must meet the bar before the file is written
(rank-normalised R-hat < 1.01, bulk and tail ESS >= 400, no divergences, tree depth not saturated).
`tests/test_references.py` checks that the stored file still meets it and that a short fresh run agrees with it
within Monte Carlo error. Each file records its settings, seed, library versions, git commit (and the sha256 of the
library sources that made it), diagnostics and run time.

To add a reference for another chapter: write a function that runs the long computation and returns a
`Reference` (see `bnn_toy_nuts`), and decorate it with `@register("name")`. Run it niced, one thread:

    OMP_NUM_THREADS=1 nice python tools/make_references.py NAME
"""
import argparse
import hashlib
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, NamedTuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# the bar of a sampler reference, on every quantity it is compared on
BAR = {"max R-hat": 1.01, "min ESS": 400, "divergences": 0, "max fraction at the depth cap": 0.1}


class Reference(NamedTuple):
    "One generated reference, ready to be checked and saved."
    file: str            # file name inside bayesnotes/data
    what: str            # one line: what it is a reference of
    seed: int            # the seed of the run
    settings: dict       # everything needed to rerun it (JSON-serialisable)
    diagnostics: dict    # convergence diagnostics of what is stored, on what is compared
    diagnostics_on: str  # which quantities the diagnostics are computed on
    problems: list       # why the diagnostics miss the bar (empty: it meets it)
    save: Callable       # save(path, provenance) writes the file
    sources: tuple = ()  # library modules whose code made it (their sha256 is recorded)
    bar: dict = None     # the bar it must meet, recorded in the provenance; None: the sampler bar `BAR`


REFERENCES = {}


def register(name):
    "Decorator: add a generator `() -> Reference` to the registry under `name`."
    def deco(fn):
        REFERENCES[name] = fn
        return fn
    return deco


def _git(*args):
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def versions():
    "Library versions, the git commit of the repository and the machine."
    import numpy
    import scipy
    dirty = bool(_git("status", "--porcelain", "bayesnotes", "nbs"))
    return {"python": platform.python_version(), "numpy": numpy.__version__, "scipy": scipy.__version__,
            "autograd": importlib.metadata.version("autograd"), "machine": platform.machine(),
            "platform": platform.platform(), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "unset"),
            "bayesnotes commit": _git("rev-parse", "HEAD") + (" (with uncommitted changes)" if dirty else "")}


def source_hashes(modules):
    "sha256 of each library source file, so a run made from uncommitted code can still be matched to its code."
    return {m: hashlib.sha256((ROOT / "bayesnotes" / f"{m}.py").read_bytes()).hexdigest()[:16] for m in modules}


def sampler_problems(d):
    "Why a sampler reference's diagnostics miss `BAR` (empty list: it meets it)."
    problems = []
    if max(d["max R-hat f(x)"], d["max R-hat (f - mean)^2"]) >= BAR["max R-hat"]:
        problems.append(f"R-hat >= {BAR['max R-hat']}")
    if min(d["min bulk ESS f(x)"], d["min tail ESS f(x)"], d["min bulk ESS (f - mean)^2"]) < BAR["min ESS"]:
        problems.append(f"ESS < {BAR['min ESS']}")
    if d["divergences"] > BAR["divergences"]:
        problems.append("divergences")
    if d["fraction at the depth cap"] > BAR["max fraction at the depth cap"]:
        problems.append("tree depth saturated")
    return problems


@register("bnn_toy_nuts")
def bnn_toy_nuts():
    "NUTS on the 10-unit toy BNN (nbs/07_bnn.ipynb): 16 chains x (1000 + 2000), depth <= 10, about 15 min of CPU."
    from bayesnotes import bnn
    fit = bnn.nuts_reference(recompute=True, progress=sys.stderr.isatty())
    diag = bnn.reference_diagnostics(fit)
    settings = {**bnn.BNN_REFERENCE_RUN, "thin": bnn.BNN_REFERENCE_THIN,
                **{k: (list(v) if isinstance(v, tuple) else v) for k, v in bnn.TOY_MODEL.items()}, "hidden": [10],
                "data": "toy_regression_data(20, 0)", "target": "whitened weights eta = theta / prior_std",
                "init": "anchored-ensemble members (nuts_regression default)", "adaptation": "Stan-style windows"}
    run = fit.result
    return Reference(
        file=bnn.BNN_REFERENCE_FILE, seed=bnn.BNN_REFERENCE_SEED, settings=settings, diagnostics=diag,
        what="NUTS posterior of the 10-unit toy BNN on the 20-point data set (bnn.nuts_reference)",
        diagnostics_on=f"f(x) at BNN_REFERENCE_GRID ({bnn.BNN_REFERENCE_GRID.size} inputs on [-2, 2]: the 300 of "
                       "fig_nuts_reference and the 81 of nuts_distances), stored (thinned) draws; depth, divergences "
                       "and acceptance over every transition",
        problems=sampler_problems(diag), sources=("bnn", "mcmc", "core", "diagnostics"),
        save=lambda path, provenance: bnn.save_nuts_reference(
            fit, path, {**provenance, "step_size": [round(float(s), 6) for s in run.step_size]}))


@register("bnn_diabetes_benchmark")
def bnn_diabetes_benchmark():
    "Cinelli et al.'s comparison (BBB, MC dropout, PBP, Vadam) on diabetes, 20 random 90/10 splits: a few CPU minutes."
    import numpy as np
    from bayesnotes import bnn, pbp
    X, y = bnn.load_diabetes_data()
    methods = {**bnn.cinelli_methods(), "PBP": lambda X, y, rng: pbp.pbp(X, y, rng=rng, **bnn.PBP_BENCHMARK)}
    res = bnn.regression_benchmark(X, y, methods, n_splits=bnn.BENCHMARK_REFERENCE_SPLITS,
                                   rng=bnn.BENCHMARK_REFERENCE_SEED, progress=sys.stderr.isatty())
    finite = bool(np.all(np.isfinite(res.rmse)) and np.all(np.isfinite(res.loglik)))
    settings = {"data": "bnn.load_diabetes_data() (442 x 10)", "splits": bnn.BENCHMARK_REFERENCE_SPLITS,
                "test_fraction": 0.1, "model": {k: (list(v) if isinstance(v, tuple) else v)
                                                 for k, v in bnn.BENCHMARK_MODEL.items()},
                "train": bnn.BENCHMARK_TRAIN, "pbp": {k: (list(v) if isinstance(v, tuple) else v)
                                                      for k, v in bnn.PBP_BENCHMARK.items()},
                "methods": list(methods), "standard errors": "Nadeau-Bengio corrected, BenchmarkResult.summary"}
    return Reference(
        file=bnn.BENCHMARK_REFERENCE_FILE, seed=bnn.BENCHMARK_REFERENCE_SEED, settings=settings,
        what="test RMSE and log-likelihood per split of BBB, MC dropout, Vadam and PBP on diabetes",
        diagnostics={"splits": int(res.rmse.shape[1]), "all scores finite": finite},
        diagnostics_on="every (method, split) score", problems=[] if finite else ["non-finite scores"],
        bar={"splits": bnn.BENCHMARK_REFERENCE_SPLITS, "all scores finite": True},
        sources=("bnn", "pbp", "ep", "core"), save=lambda path, provenance: bnn.save_benchmark(res, path, provenance))


def make(name, out=None, force=False):
    "Run reference `name`, print its provenance, and write it if it meets the bar (or `force`)."
    env = versions()                    # the code and libraries the run starts from
    t_cpu, t_wall = time.process_time(), time.time()
    ref = REFERENCES[name]()
    cpu, wall = time.process_time() - t_cpu, time.time() - t_wall
    provenance = {"name": name, "what": ref.what, "generator": f"python tools/make_references.py {name}",
                  "seed": ref.seed, "settings": ref.settings, "diagnostics": ref.diagnostics,
                  "diagnostics_on": ref.diagnostics_on, "bar": BAR if ref.bar is None else ref.bar, "cpu_seconds": round(cpu, 1),
                  "wall_seconds": round(wall, 1), "versions": env, "sources sha256": source_hashes(ref.sources),
                  "created": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    print(json.dumps(provenance, indent=1))
    if ref.problems and not force:
        print("NOT written: the run misses the bar:", ", ".join(ref.problems))
        return 1
    path = Path(out) if out else ROOT / "bayesnotes" / "data" / ref.file
    ref.save(path, provenance)
    print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB)" + (" despite: " + ", ".join(ref.problems)
                                                                   if ref.problems else ""))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("name", nargs="?", choices=sorted(REFERENCES))
    ap.add_argument("--out", help="write here instead of bayesnotes/data/<file>")
    ap.add_argument("--force", action="store_true", help="write the file even if the bar is missed")
    args = ap.parse_args(argv)
    if not args.name:
        print("bar:", json.dumps(BAR))
        for name, fn in sorted(REFERENCES.items()):
            print(f"{name}: {fn.__doc__}")
        return 0
    return make(args.name, args.out, args.force)


if __name__ == "__main__":
    sys.exit(main())
