"""`to_arviz` (issue 32): the book's results handed to ArviZ, whose diagnostics must then equal the book's own.
ArviZ is an optional extra: these tests run where it is installed (`make test-arviz`), except the first."""
import sys

import autograd.numpy as anp
import numpy as np
import pytest

from bayesnotes.diagnostics import ess_bulk, ess_tail, mcse_mean, mcse_sd, rhat, to_arviz


def test_without_arviz_the_error_says_how_to_get_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "arviz", None)          # import arviz now raises ImportError
    with pytest.raises(ImportError, match="pip install arviz"):
        to_arviz(np.zeros((2, 10, 1)))


@pytest.fixture(scope="module")
def nuts_run(seed):
    from bayesnotes.mcmc import sample
    sd = np.array([1.0, 2.0, 0.5])
    return sample("nuts", lambda th: -0.5 * anp.sum((th / sd) ** 2), x0=np.zeros((4, 3)), n_warmup=300,
                  n_draws=300, rng=seed(41))


def test_mcmc_diagnostics_equal_arviz(nuts_run):
    "R-hat, bulk and tail ESS, MCSE of mean and sd, E-BFMI and divergences: ArviZ on to_arviz's data = the book, 1e-9."
    az = pytest.importorskip("arviz")
    idata = to_arviz(nuts_run)
    x = nuts_run.draws
    assert idata.posterior["theta"].shape == x.shape
    for name, ours, theirs in [
            ("rhat", rhat, lambda d: az.rhat(d)), ("ess_bulk", ess_bulk, lambda d: az.ess(d, method="bulk")),
            ("ess_tail", ess_tail, lambda d: az.ess(d, method="tail")),
            ("mcse_mean", mcse_mean, lambda d: az.mcse(d, method="mean")),
            ("mcse_sd", mcse_sd, lambda d: az.mcse(d, method="sd"))]:
        a = np.asarray(theirs(idata)["theta"].values, float)
        b = np.array([float(ours(x[:, :, i])) for i in range(x.shape[2])])
        np.testing.assert_allclose(a, b, rtol=1e-9, err_msg=name)
    np.testing.assert_allclose(az.bfmi(idata), nuts_run.e_bfmi, rtol=1e-9)
    st = idata.sample_stats
    assert int(st["diverging"].sum()) == int(nuts_run.stats.divergent.sum())
    np.testing.assert_array_equal(st["lp"].values, nuts_run.stats.logdensity)
    np.testing.assert_array_equal(st["tree_depth"].values, nuts_run.stats.tree_depth)
    assert st["step_size"].shape == x.shape[:2]


def test_var_names_give_one_variable_per_coordinate(nuts_run):
    az = pytest.importorskip("arviz")
    idata = to_arviz(nuts_run, var_names=["a", "b", "c"])
    s = az.summary(idata, round_to="none")
    assert list(s.index) == ["a", "b", "c"]
    np.testing.assert_allclose(s["r_hat"].values, [float(rhat(nuts_run.draws[:, :, i])) for i in range(3)], rtol=1e-9)
    with pytest.raises(ValueError, match="var_names"):
        to_arviz(nuts_run, var_names=["a", "b"])
    with pytest.raises(ValueError, match="var_names"):
        to_arviz(nuts_run, var_names=["a", "a", "b"])


def test_vi_and_particle_results(seed):
    pytest.importorskip("arviz")
    from bayesnotes.smc import tempered_smc
    from bayesnotes.vi import advi
    fit = advi(lambda th: -0.5 * anp.sum(th ** 2), dim=2, n_iter=50, rng=seed(42))
    a, b = to_arviz(fit, n_draws=200, rng=3), to_arviz(fit, n_draws=200, rng=3)
    assert a.posterior["theta"].shape == (1, 200, 2)
    np.testing.assert_array_equal(a.posterior["theta"].values, b.posterior["theta"].values)   # SPEC 7: same seed
    res = tempered_smc(lambda t: -0.5 * np.sum(t ** 2, 1), lambda t: -0.5 * np.sum((t - 1) ** 2, 1),
                       lambda rng, N: rng.normal(size=(N, 2)), N=200, rng=seed(43))
    d = to_arviz(res, n_draws=300, rng=4).posterior["theta"].values[0]
    assert d.shape == (300, 2)
    assert all((res.particles == row).all(1).any() for row in d)   # every draw is one of the particles
    with pytest.raises(TypeError, match="MCMCResult"):
        to_arviz({"draws": 1})
    with pytest.raises(ValueError, match="shape"):
        to_arviz(np.zeros(5))
