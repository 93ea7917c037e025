"""Cross-check of bayesnotes.diagnostics against ArviZ (an independent implementation of Vehtari et al. 2021).

Not part of the test suite (ArviZ is not a dependency). Run with an environment that has arviz, numpy, scipy,
matplotlib and autograd, from the repository root:

    /tmp/benchvenv/bin/python benchmarks/mcmc/check_arviz.py

It prints the largest relative difference for each diagnostic over a set of test chains (AR(1) chains with
positive and negative correlation, heavy-tailed chains, chains with a shifted location or a larger scale, odd
lengths). R-hat, bulk/tail ESS, the ESS of the mean and the MCSE of the mean should agree to rounding error.
The MCSE of the sd differs on purpose: we use the delta-method formula of Vehtari et al. (2021, as in the
`posterior` package 1.0), recent ArviZ versions use a different approximation; both are printed.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
import arviz as az                                                          # noqa: E402
from bayesnotes import diagnostics as dg                                    # noqa: E402


def chains():
    rng = np.random.default_rng(0)
    out = {}
    for phi in (-0.4, 0.0, 0.6, 0.95):
        out[f"ar1({phi})"] = dg.ar1_chains(phi, 4, 1001, rng)          # odd length: the middle draw is dropped
    out["cauchy"] = rng.standard_cauchy((4, 500))
    x = rng.normal(size=(4, 800)); x[0] += 0.7
    out["shifted"] = x
    x = rng.normal(size=(4, 800)); x[1] *= 2.5
    out["scaled"] = x
    out["one chain"] = dg.ar1_chains(0.5, 1, 600, rng)
    return out


def main():
    worst = {}
    for name, x in chains().items():
        pairs = {"rhat": (dg.rhat(x), az.rhat(x, method="rank")),
                 "ess_bulk": (dg.ess_bulk(x), az.ess(x, method="bulk")),
                 "ess_tail": (dg.ess_tail(x), az.ess(x, method="tail")),
                 "ess_mean": (dg.ess_mean(x), az.ess(x, method="mean")),
                 "mcse_mean": (dg.mcse_mean(x), az.mcse(x, method="mean")),
                 "mcse_sd": (dg.mcse_sd(x), az.mcse(x, method="sd"))}
        row = []
        for k, (ours, theirs) in pairs.items():
            theirs = float(np.asarray(theirs))
            rel = abs(ours - theirs) / abs(theirs)
            worst[k] = max(worst.get(k, 0.0), rel)
            row.append(f"{k}={ours:.4g}/{theirs:.4g}")
        print(f"{name:12s} " + "  ".join(row))
    print("\nlargest relative difference (bayesnotes vs ArviZ " + az.__version__ + "):")
    for k, v in worst.items():
        print(f"  {k:10s} {v:.2e}")


if __name__ == "__main__":
    main()
