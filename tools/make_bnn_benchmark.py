"""Regenerate bayesnotes/data/bnn_diabetes_benchmark.npz: Cinelli et al.'s comparison (BBB, MC dropout, Vadam, PBP) on
scikit-learn's diabetes data over 20 random 90/10 splits, with its provenance and the convergence of every Vadam fit.

    OMP_NUM_THREADS=1 nice python tools/make_bnn_benchmark.py            # a few CPU minutes; writes the file
    OMP_NUM_THREADS=1 nice python tools/make_bnn_benchmark.py --out F    # a trial run written to F

The methods are `bnn.cinelli_methods()` (Vadam with `bnn.VADAM_BENCHMARK`) and PBP with `bnn.PBP_BENCHMARK`, scored by
`bnn.regression_benchmark` with seed `bnn.BENCHMARK_REFERENCE_SEED`. Each Vadam fit is checked with
`bnn.vadam_convergence` against `bnn.VADAM_CONVERGED` (sigma has left its start, s has forgotten it, the objective is
flat at the end); the file is written only if every split meets that bar and every score is finite (or with --force).
The provenance records the function, settings, seed, library versions, git commit, sha256 of the library sources,
the per-split diagnostics with each Vadam objective trace (block means) and the run time; `tests/test_bnn.py` checks
the stored file against the bar. This replaces `tools/make_references.py bnn_diabetes_benchmark`, which does not record
the Vadam diagnostics.
"""
import argparse
import inspect
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from make_references import source_hashes, versions   # noqa: E402  (the same provenance helpers as the other references)

N_BLOCKS = 20   # the Vadam objective trace is stored as the means of this many equal blocks of steps


def run(progress=False):
    "Run the comparison; returns (BenchmarkResult, settings, diagnostics, problems)."
    import numpy as np
    from bayesnotes import bnn, pbp
    X, y = bnn.load_diabetes_data()
    methods = {**bnn.cinelli_methods(), "PBP": lambda X, y, rng: pbp.pbp(X, y, rng=rng, **bnn.PBP_BENCHMARK)}
    vadam_settings = {**bnn.BENCHMARK_TRAIN, **bnn.VADAM_BENCHMARK}
    init_std = inspect.signature(bnn.vadam).parameters["init_std"].default   # cinelli_methods keeps vadam's default
    conv, traces = [], []
    fit_vadam = methods["Vadam"]

    def vadam_logged(X, y, rng):       # regression_benchmark calls it once per split, in split order
        fit = fit_vadam(X, y, rng)
        conv.append(bnn.vadam_convergence(fit, init_std=init_std, beta2=vadam_settings["beta2"]))
        traces.append(np.round(fit.trace.reshape(N_BLOCKS, -1).mean(1), 5).tolist())
        return fit

    methods["Vadam"] = vadam_logged
    res = bnn.regression_benchmark(X, y, methods, n_splits=bnn.BENCHMARK_REFERENCE_SPLITS,
                                   rng=bnn.BENCHMARK_REFERENCE_SEED, progress=progress)
    finite = bool(np.all(np.isfinite(res.rmse)) and np.all(np.isfinite(res.loglik)))
    tuples = lambda d: {k: (list(v) if isinstance(v, tuple) else v) for k, v in d.items()}
    settings = {"function": "bnn.regression_benchmark(X, y, {**bnn.cinelli_methods(), 'PBP': pbp.pbp(**PBP_BENCHMARK)}, "
                            "n_splits=BENCHMARK_REFERENCE_SPLITS, rng=BENCHMARK_REFERENCE_SEED)",
                "data": "bnn.load_diabetes_data() (442 x 10)", "splits": bnn.BENCHMARK_REFERENCE_SPLITS,
                "test_fraction": 0.1, "model": tuples(bnn.BENCHMARK_MODEL), "train": bnn.BENCHMARK_TRAIN,
                "vadam": {**vadam_settings, "init_std": init_std, "curvature": "magnitude"},
                "pbp": tuples(bnn.PBP_BENCHMARK), "methods": list(methods),
                "standard errors": "Nadeau-Bengio corrected, BenchmarkResult.summary"}
    per_split = {k: [c[k] for c in conv] for k in conv[0]}
    problems = [] if finite else ["non-finite scores"]
    for j, c in enumerate(conv):
        problems += [f"split {j}: Vadam {p}" for p in bnn.vadam_problems(c)]
    diagnostics = {"splits": int(res.rmse.shape[1]), "all scores finite": finite,
                   "Vadam convergence (per split)": per_split,
                   "Vadam objective trace (per split, means of 20 equal blocks of steps)": traces}
    return res, settings, diagnostics, problems


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="write here instead of bayesnotes/data/<file>")
    ap.add_argument("--force", action="store_true", help="write the file even if the bar is missed")
    args = ap.parse_args(argv)
    from bayesnotes import bnn
    env = versions()
    t_cpu, t_wall = time.process_time(), time.time()
    res, settings, diagnostics, problems = run(progress=sys.stderr.isatty())
    cpu, wall = time.process_time() - t_cpu, time.time() - t_wall
    provenance = {"name": "bnn_diabetes_benchmark", "generator": "python tools/make_bnn_benchmark.py",
                  "what": "test RMSE and log-likelihood per split of BBB, MC dropout, Vadam and PBP on diabetes",
                  "seed": bnn.BENCHMARK_REFERENCE_SEED, "settings": settings, "diagnostics": diagnostics,
                  "diagnostics_on": "every (method, split) score; every split's Vadam fit (bnn.vadam_convergence)",
                  "bar": {"splits": bnn.BENCHMARK_REFERENCE_SPLITS, "all scores finite": True,
                          "Vadam, every split": bnn.VADAM_CONVERGED},
                  "cpu_seconds": round(cpu, 1), "wall_seconds": round(wall, 1), "versions": env,
                  "sources sha256": source_hashes(("bnn", "pbp", "ep", "core")),
                  "created": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    shown = {**provenance, "diagnostics": {k: v for k, v in diagnostics.items() if "trace" not in k}}
    print(json.dumps(shown, indent=1))
    if problems and not args.force:
        print("NOT written: the run misses the bar:", "; ".join(problems))
        return 1
    path = Path(args.out) if args.out else ROOT / "bayesnotes" / "data" / bnn.BENCHMARK_REFERENCE_FILE
    bnn.save_benchmark(res, path, provenance)
    print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB)" + (" despite: " + "; ".join(problems) if problems else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
