"""Stored long-run references (bayesnotes/data, made by tools/make_references.py) still earn the word.

* In `make test`: the stored BNN reference meets the bar on exactly what the chapter compares (f(x) on the plotted
  grid): rank-normalised R-hat < 1.01, bulk and tail ESS >= 400, no divergences, fewer than 10% of transitions at
  the tree-depth cap; and its provenance records what made it.
* In `make test-slow`: a fresh, shorter NUTS run agrees with it within Monte Carlo error.
"""
import numpy as np
import pytest

from bayesnotes import bnn
from bayesnotes.diagnostics import ess_bulk, mcse_mean, mcse_sd


@pytest.fixture(scope="module")
def reference():
    return bnn.nuts_reference()


def test_stored_bnn_reference_meets_the_bar(reference):
    d = bnn.reference_diagnostics(reference)
    assert d["max R-hat f(x)"] < 1.01 and d["max R-hat (f - mean)^2"] < 1.01
    assert min(d["min bulk ESS f(x)"], d["min tail ESS f(x)"], d["min bulk ESS (f - mean)^2"]) >= 400
    assert d["divergences"] == 0 and d["fraction at the depth cap"] < 0.1
    s = reference.result.provenance["settings"]
    assert reference.draws.shape == (s["n_chains"], s["n_draws"], 31)
    assert {k: s[k] for k in bnn.BNN_REFERENCE_RUN} == bnn.BNN_REFERENCE_RUN     # made with the declared settings
    prov = reference.result.provenance
    assert prov["seed"] == bnn.BNN_REFERENCE_SEED and {"numpy", "scipy", "autograd"} <= set(prov["versions"])
    # the diagnostics recorded at generation are those of the stored (float32) draws, to rounding
    for key in ("max R-hat f(x)", "min bulk ESS f(x)"):
        assert np.isclose(prov["diagnostics"][key], d[key], rtol=1e-3), key


def test_toy_comparison_uses_the_stored_reference(reference):
    tc = bnn.toy_comparison(20, hidden=10, nuts=True)
    assert np.array_equal(tc.fits["NUTS"].draws, reference.draws)


@pytest.mark.slow
def test_fresh_short_run_agrees_with_the_stored_reference(reference, seed):
    """A fresh run (4 chains x 150 + 150, another seed) estimates the posterior mean and sd of f(x) at 5 inputs;
    each differs from the reference by less than 5.2 combined standard errors (10 comparisons: false alarm 1e-6,
    with the MCSEs estimated by the rank-normalised ESS of each run). About 5 minutes of CPU."""
    X, y, model = bnn._toy_reference_problem()
    fresh = bnn.nuts_regression(X, y, rng=seed(1), n_chains=4, n_warmup=150, n_draws=150, max_depth=10, **model)
    x = np.array([-2.0, -1.0, 0.0, 1.0, 2.0])[:, None]
    fr, rf = fresh.function_draws(x), reference.function_draws(x)
    assert np.all(ess_bulk(fr) > 50)                   # the short run is long enough for its MCSE to mean something
    for est, mcse in ((lambda f: f.reshape(-1, f.shape[-1]).mean(0), mcse_mean),
                      (lambda f: f.reshape(-1, f.shape[-1]).std(0, ddof=1), mcse_sd)):
        diff = est(fr) - est(rf)
        se = np.hypot(mcse(fr), mcse(rf))
        assert np.all(np.abs(diff) < 5.2 * se), (diff, se)
