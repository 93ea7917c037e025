"""`to_arviz` (issue 32): the book's results handed to ArviZ. The conversion itself (`_arviz_data`, the keyword
arguments of `arviz.from_dict`: layouts, names, per-draw statistics, resampling, copies, validation) is tested without
ArviZ and runs in `make test`; the comparisons with ArviZ's own diagnostics run where ArviZ is installed
(`make test-arviz`) and are skipped elsewhere."""
import sys
import warnings

import autograd.numpy as anp
import numpy as np
import pytest
from scipy import stats

from bayesnotes.diagnostics import (ChainShapeWarning, _arviz_data, ess_bulk, ess_tail, mcse_mean, mcse_sd, rhat,
                                    to_arviz)
from bayesnotes.mcmc import MCMCResult, SampleStats, sample

KERNELS = ("rwmh", "mala", "hmc", "nuts", "slice")


def post(d):
    "Shapes of the posterior variables of an `_arviz_data` answer."
    return {k: v.shape for k, v in d["posterior"].items()}


# --- importing ArviZ -------------------------------------------------------------------------------------------------

def test_without_arviz_the_error_says_how_to_get_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "arviz", None)          # import arviz now raises ModuleNotFoundError
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'arviz>=0.21,<1'"):
        to_arviz(np.zeros((2, 10, 1)))


def _fake_arviz(monkeypatch, tmp_path, body):
    "Make `import arviz` run `body` as the package's __init__ (the real ArviZ, if imported, comes back afterwards)."
    (tmp_path / "arviz").mkdir()
    (tmp_path / "arviz" / "__init__.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(sys.modules, "arviz", None)   # records what was there (the real ArviZ, or nothing) for undo
    monkeypatch.delitem(sys.modules, "arviz")


def test_a_broken_arviz_is_not_reported_as_missing(monkeypatch, tmp_path):
    _fake_arviz(monkeypatch, tmp_path, "raise ImportError(\"cannot import name 'trapz' from 'numpy'\")\n")
    with pytest.raises(ImportError, match="trapz") as e:
        to_arviz(np.zeros((2, 10)))
    assert "pip install" not in str(e.value)


def test_a_missing_dependency_of_arviz_is_named(monkeypatch, tmp_path):
    _fake_arviz(monkeypatch, tmp_path, "import bayesnotes_no_such_module_zz\n")
    with pytest.raises(ModuleNotFoundError) as e:
        to_arviz(np.zeros((2, 10)))
    assert e.value.name == "bayesnotes_no_such_module_zz" and "pip install" not in str(e.value)


def test_arviz_1_is_refused_with_the_supported_range(monkeypatch, tmp_path):
    # ArviZ 1.0's from_dict takes one nested dict (arviz_base.from_dict(data, *, ...)): to_arviz's call would fail
    _fake_arviz(monkeypatch, tmp_path, "__version__ = '1.0.0'\ndef from_dict(data, **kw): raise AssertionError\n")
    with pytest.raises(ImportError, match=r"arviz>=0.21,<1"):
        to_arviz(np.zeros((2, 10)))


# --- arrays: the chapter's input conventions --------------------------------------------------------------------------

def test_arrays_follow_the_chapter_input_conventions(seed):
    rng = np.random.default_rng(seed(40))
    one = rng.normal(size=50)
    d = _arviz_data(one)
    assert post(d) == {"x": (1, 50)}                                 # 1-d: one chain, a scalar variable
    np.testing.assert_array_equal(d["posterior"]["x"][0], one)
    x = rng.normal(size=(3, 20))
    assert post(_arviz_data(x)) == {"x": (3, 20)}                    # (chain, draw): a scalar, not x[0]
    assert post(_arviz_data(x.tolist())) == {"x": (3, 20)}           # any array-like
    np.testing.assert_array_equal(_arviz_data(x.tolist())["posterior"]["x"], x)
    assert post(_arviz_data(rng.normal(size=(2, 10, 2, 2)))) == {"x": (2, 10, 2, 2)}   # trailing shape kept
    with pytest.warns(ChainShapeWarning):                            # (draw, chain) read the wrong way round
        _arviz_data(rng.normal(size=(30, 10)))
    with pytest.raises(ValueError, match=r"x\[None\]"):             # one chain (draw, dim) is not 1000 chains
        _arviz_data(rng.normal(size=(1000, 3)))
    for bad in (np.full((2, 10), np.nan), [[1.0, np.inf, 0.0, 0.0, 0.0]], "abc", np.zeros((2, 3)), 3.0):
        with pytest.raises(ValueError, match="result"):
            _arviz_data(bad)


def test_arrays_and_statistics_are_copies(seed):
    # from_dict does not copy: an InferenceData edited in place must not write into a result (or a cached run)
    x = np.random.default_rng(seed(41)).normal(size=(2, 10, 3))
    before = x.copy()
    for d in (_arviz_data(x), _arviz_data(x, var_names=["a", "b", "c"]), _arviz_data(x, var_names={"a": slice(0, 2)}),
              _arviz_data({"y": x})):
        for v in d["posterior"].values():
            assert not np.shares_memory(v, x)
            v += 100.0
    np.testing.assert_array_equal(x, before)
    r = _fake_mcmc("nuts", seed(42))
    d = _arviz_data(r)
    arrays = list(r.stats) + [r.draws, r.step_size]
    assert not any(np.shares_memory(a, b) for a in arrays for b in [*d["posterior"].values(), *d["sample_stats"].values()])


# --- names, dims and coords -------------------------------------------------------------------------------------------

def test_var_names_list_dict_and_refusals(seed):
    x = np.random.default_rng(seed(43)).normal(size=(2, 10, 4))
    d = _arviz_data(x, var_names=["a", "b", "c", "e"])["posterior"]
    assert list(d) == ["a", "b", "c", "e"] and all(v.shape == (2, 10) for v in d.values())
    np.testing.assert_array_equal(d["c"], x[:, :, 2])
    d = _arviz_data(x, var_names={"mu": 0, "theta": slice(1, None), "pair": [3, 1]})["posterior"]
    assert {k: v.shape for k, v in d.items()} == {"mu": (2, 10), "theta": (2, 10, 3), "pair": (2, 10, 2)}
    np.testing.assert_array_equal(d["theta"], x[:, :, 1:])
    np.testing.assert_array_equal(d["pair"], x[:, :, [3, 1]])
    assert list(_arviz_data(x[:, :, 0], var_names=["mu"])["posterior"]) == ["mu"]   # (chain, draw): one name
    for bad in ("mu",                              # a str is not split into letters
                "abcd",
                ["chain", "b", "c", "e"], ["a", "draw", "c", "e"],      # ArviZ's own dimensions
                ["a", "a", "b", "c"], ["a", "b"], [],                    # repeated, too few, none
                ["a", "b", 3, "c"], ["a", "", "b", "c"],                 # not a name
                {"a": 7}, {"a": "b"}, {"a": slice(0, 2), "a_dim_0": 2},  # bad index; a name equal to a dimension
                ):
        with pytest.raises(ValueError, match="var_names|name"):
            _arviz_data(x, var_names=bad)
    with pytest.raises(ValueError, match="dict"):
        _arviz_data(x[:, :, 0], var_names={"a": 0})


def test_dims_and_coords_are_checked_and_passed(seed):
    x = np.random.default_rng(seed(44)).normal(size=(2, 10, 3))
    d = _arviz_data(x, var_names={"mu": 0, "theta": slice(1, 3)}, dims={"theta": ["school"]},
                    coords={"school": ["A", "B"]})
    assert d["dims"] == {"theta": ["school"]} and d["coords"] == {"school": ["A", "B"]}
    for dims, coords in [({"theta": ["school", "extra"]}, None), ({"nope": ["s"]}, None), ({"theta": "school"}, None),
                         ({"theta": ["chain"]}, None), ({"theta": ["school"]}, {"school": ["A"]}),
                         ({"theta": ["school"]}, {"other": ["A", "B"]}), ({"theta": ["mu"]}, None)]:
        with pytest.raises(ValueError, match="dim|coords|name"):
            _arviz_data(x, var_names={"mu": 0, "theta": slice(1, 3)}, dims=dims, coords=coords)


# --- MCMC results: statistics under ArviZ's names only where they mean what ArviZ means ------------------------------

def _fake_mcmc(kernel, s, n_chains=3, n_draws=12, dim=2):
    "An MCMCResult with distinct random statistics, some divergences and per-chain step sizes."
    rng = np.random.default_rng(s)
    shape = (n_chains, n_draws)
    st = SampleStats(accept_prob=rng.random(shape), divergent=rng.random(shape) < 0.3,
                     tree_depth=rng.integers(1, 6, shape), n_grad=rng.integers(0, 30, shape),
                     n_eval=rng.integers(1, 30, shape), logdensity=rng.normal(size=shape), energy=rng.normal(size=shape))
    return MCMCResult(rng.normal(size=shape + (dim,)), st, rng.random(n_chains) + 0.1, np.ones((n_chains, dim)), kernel,
                      np.ones((n_chains, 5)))


@pytest.mark.parametrize("kernel", KERNELS)
def test_mcmc_statistics_map_exactly(kernel, seed):
    r = _fake_mcmc(kernel, seed(45))
    d = _arviz_data(r)
    st, ss = r.stats, d["sample_stats"]
    assert r.stats.divergent.any()
    np.testing.assert_array_equal(d["posterior"]["x"], r.draws)
    np.testing.assert_array_equal(ss["lp"], st.logdensity)
    np.testing.assert_array_equal(ss["acceptance_rate"], st.accept_prob)
    np.testing.assert_array_equal(ss["diverging"], st.divergent)
    assert ss["diverging"].dtype == bool
    step = np.repeat(r.step_size[:, None], r.draws.shape[1], axis=1)
    expected = {"rwmh": {"proposal_scale", "n_evals"}, "slice": {"width_factor", "n_evals"},
                "mala": {"step_size", "n_steps"}, "hmc": {"step_size", "n_steps", "energy"},
                "nuts": {"step_size", "n_steps", "energy", "tree_depth"}}[kernel]
    assert set(ss) == {"lp", "acceptance_rate", "diverging"} | expected
    if "energy" in ss:
        np.testing.assert_array_equal(ss["energy"], st.energy)
    if "tree_depth" in ss:
        np.testing.assert_array_equal(ss["tree_depth"], st.tree_depth)
    if "n_steps" in ss:
        np.testing.assert_array_equal(ss["n_steps"], st.n_grad)
    if "n_evals" in ss:
        np.testing.assert_array_equal(ss["n_evals"], st.n_eval)
    for name in ("step_size", "proposal_scale", "width_factor"):
        if name in ss:
            np.testing.assert_array_equal(ss[name], step)
    assert kernel in d["attrs"]["inference"]


@pytest.fixture(scope="module")
def small_runs(seed):
    "Every kernel family of `sample`, 2 chains of 100 draws on N(0, diag(1, 4))."
    return {k: sample(k, lambda th: -0.5 * anp.sum(th ** 2 / np.array([1.0, 4.0])), x0=np.zeros(2), n_chains=2,
                      n_warmup=100, n_draws=100, rng=seed(46)) for k in KERNELS}


def test_real_runs_of_every_kernel(small_runs):
    for k, r in small_runs.items():
        d = _arviz_data(r, var_names=["a", "b"])
        assert post(d) == {"a": (2, 100), "b": (2, 100)}
        np.testing.assert_array_equal(d["sample_stats"]["lp"], r.stats.logdensity)
        assert ("step_size" in d["sample_stats"]) == (k in ("mala", "hmc", "nuts"))
        if k in ("mala", "hmc", "nuts"):
            assert np.all(d["sample_stats"]["n_steps"] >= 1)


def test_other_results_with_draws(seed):
    from bayesnotes.mhvariants import MHResult
    from bayesnotes.pmcmc import GibbsResult, PIMHResult
    from bayesnotes.sgmcmc import SGMCMCResult
    rng = np.random.default_rng(seed(47))
    mh = MHResult(rng.normal(size=(2, 20, 3)), rng.random((2, 20)), rng.normal(size=(2, 20)), np.ones((2, 1)),
                  np.ones((2, 5, 1)))
    d = _arviz_data(mh)
    np.testing.assert_array_equal(d["sample_stats"]["acceptance_rate"], mh.accept_prob)
    np.testing.assert_array_equal(d["sample_stats"]["lp"], mh.logdensity)
    sg = SGMCMCResult(rng.normal(size=(2, 20, 3)), rng.random((2, 20)), 500)
    d = _arviz_data(sg)
    assert set(d["sample_stats"]) == {"step_size"}
    np.testing.assert_array_equal(d["sample_stats"]["step_size"], sg.step_size)
    pimh = PIMHResult(rng.normal(size=(2, 20, 6, 2)), rng.random((2, 20)) < 0.5, rng.normal(size=(2, 20)))
    d = _arviz_data(pimh)
    assert post(d) == {"x": (2, 20, 6, 2)} and d["sample_stats"]["accepted"].dtype == bool
    np.testing.assert_array_equal(d["sample_stats"]["log_evidence"], pimh.log_evidence)
    g = GibbsResult(rng.normal(size=(2, 20, 2)), rng.normal(size=(2, 20, 6, 1)))
    with pytest.raises(TypeError, match="_asdict"):
        _arviz_data(g)
    assert post(_arviz_data(g._asdict())) == {"theta": (2, 20, 2), "paths": (2, 20, 6, 1)}
    with pytest.raises(ValueError, match="share"):
        _arviz_data({"a": np.zeros((2, 20)), "b": np.zeros((2, 10))})


def test_n_draws_is_an_error_where_it_cannot_apply(seed):
    x = np.random.default_rng(seed(48)).normal(size=(2, 10))
    for r in (x, _fake_mcmc("nuts", seed(48)), {"y": x}):
        for n in (-3, 500):
            with pytest.raises(ValueError, match="n_draws"):
                _arviz_data(r, n_draws=n)


# --- weighted particles ------------------------------------------------------------------------------------------------

class _Particles:
    "A weighted-particle result (as the SMC samplers return), with weights or log weights."
    def __init__(self, particles, weights=None, log_weights=None, log_evidence=None):
        self.particles, self.log_evidence = particles, log_evidence
        if weights is not None:
            self.weights = weights
        if log_weights is not None:
            self.log_weights = log_weights


def test_one_hot_and_zero_weights(seed):
    P = np.arange(10.0)[:, None] * np.array([1.0, -1.0])             # distinct particles (10, 2)
    W = np.zeros(10)
    W[7] = 1.0
    x = _arviz_data(_Particles(P, W), n_draws=500, rng=seed(49))["posterior"]["x"][0]
    assert (x == P[7]).all()                                         # every draw is the one particle with weight
    W = np.where(np.arange(10) % 2 == 0, 0.0, 1.0)                    # only the odd particles can be drawn
    x = _arviz_data(_Particles(P, W), n_draws=2000, rng=seed(50))["posterior"]["x"][0, :, 0]
    assert set(x) <= {1.0, 3.0, 5.0, 7.0, 9.0}
    lw = np.where(np.arange(10) % 2 == 0, -np.inf, 1000.0 + np.arange(10))   # log weights: -inf never, no overflow
    x = _arviz_data(_Particles(P, log_weights=lw), n_draws=2000, rng=seed(51))["posterior"]["x"][0, :, 0]
    assert set(x) <= {1.0, 3.0, 5.0, 7.0, 9.0}


def test_resampling_frequencies_follow_the_weights(seed):
    # chi-square goodness of fit of 20000 resamples to the normalised weights: one comparison at the 1e-6 quantile of
    # chi2(4), false alarm 1e-6. Unnormalised weights and shifted log weights must give the same law.
    P = np.arange(5.0)
    W = np.array([8.0, 4.0, 2.0, 1.0, 1.0])
    for k, res in enumerate([_Particles(P, W), _Particles(P, log_weights=np.log(W) + 700.0)]):
        x = _arviz_data(res, n_draws=20000, rng=seed(52 + k))["posterior"]["x"][0]
        counts = np.bincount(x.astype(int), minlength=5)
        chi2 = np.sum((counts - 20000 * W / W.sum()) ** 2 / (20000 * W / W.sum()))
        assert chi2 < stats.chi2.isf(1e-6, 4), counts


def test_particle_defaults_attrs_and_bad_weights(seed):
    rng = np.random.default_rng(seed(54))
    P, W = rng.normal(size=(40, 3)), rng.random(40)
    d = _arviz_data(_Particles(P, W, log_evidence=-1.5), rng=seed(55))
    assert post(d) == {"x": (1, 40, 3)}                              # default n_draws: the number of particles
    Wn = W / W.sum()
    assert d["attrs"]["n_particles"] == 40 and d["attrs"]["log_evidence"] == -1.5
    assert d["attrs"]["weight_ess"] == pytest.approx(1 / np.sum(Wn ** 2), rel=1e-12)
    assert "not the Monte Carlo error" in d["attrs"]["resampling"]
    a, b = (_arviz_data(_Particles(P, W), n_draws=30, rng=7)["posterior"]["x"] for _ in range(2))
    np.testing.assert_array_equal(a, b)                              # SPEC 7: same seed, same draws
    for bad in [_Particles(P, -W), _Particles(P, 0 * W), _Particles(P, W[:-1]), _Particles(P, np.r_[W[:-1], np.nan]),
                _Particles(P, log_weights=np.full(40, -np.inf)), _Particles(P, log_weights=np.r_[0.0, np.full(39, np.nan)]),
                _Particles(np.r_[P[:-1], [[np.nan] * 3]], W)]:
        with pytest.raises(ValueError, match="weights|particles"):
            _arviz_data(bad)
    for n in (-3, 2.5, 3):
        with pytest.raises(ValueError, match="n_draws"):
            _arviz_data(_Particles(P, W), n_draws=n)


def test_importance_sampling_and_ais_results(seed):
    from bayesnotes.ais import AISResult
    from bayesnotes.montecarlo import ISResult
    rng = np.random.default_rng(seed(56))
    isr = ISResult(0.0, 0.1, -0.2, 0.05, 10.0, rng.normal(size=30), rng.normal(size=30))
    d = _arviz_data(isr, rng=seed(57))
    assert post(d) == {"x": (1, 30)} and set(d["posterior"]["x"][0]) <= set(isr.samples)
    ais = AISResult(-0.2, 0.1, 10.0, rng.normal(size=20), rng.normal(size=(20, 2)), np.array([0.0, 1.0]), np.zeros(1))
    assert post(_arviz_data(ais, n_draws=50, rng=seed(58))) == {"x": (1, 50, 2)}


def test_tempered_smc_draws_are_its_particles(seed):
    from bayesnotes.smc import tempered_smc
    res = tempered_smc(lambda t: -0.5 * np.sum(t ** 2, 1), lambda t: -0.5 * np.sum((t - 1) ** 2, 1),
                       lambda rng, N: rng.normal(size=(N, 2)), N=200, rng=seed(43))
    d = _arviz_data(res, rng=seed(59))["posterior"]["x"][0]
    assert d.shape == (200, 2)
    assert all((res.particles == row).all(1).any() for row in d)     # every draw is one of the particles


# --- variational fits and Laplace approximations ----------------------------------------------------------------------

def test_vi_draws_come_from_q(seed):
    # q = N((1, -2), diag(0.5, 3)^2); 4000 draws. Each coordinate's mean within 5 sd / sqrt(n) of q's, each sd within
    # 5 sd / sqrt(2 n) (the normal-theory sd of a sample sd): 4 comparisons at 5 sd, false alarm 4 x 5.7e-7 < 3e-6.
    # A mutant drawing from N(0, I) (or ignoring the scales) misses by tens of sd.
    from bayesnotes.vi import MeanFieldGaussian, VIResult
    m, s, n = np.array([1.0, -2.0]), np.array([0.5, 3.0]), 4000
    fit = VIResult(MeanFieldGaussian.from_moments(m, s ** 2), np.zeros(3))
    d = _arviz_data(fit, n_draws=n, rng=seed(60))
    x = d["posterior"]["x"][0]
    assert x.shape == (n, 2) and "variational" in d["attrs"]["inference"]
    assert np.all(np.abs(x.mean(0) - m) < 5 * s / np.sqrt(n))
    assert np.all(np.abs(x.std(0, ddof=1) - s) < 5 * s / np.sqrt(2 * n))
    assert post(_arviz_data(fit, rng=seed(61))) == {"x": (1, 1000, 2)}   # default: 1000 independent draws
    a, b = (_arviz_data(fit, n_draws=50, rng=3)["posterior"]["x"] for _ in range(2))
    np.testing.assert_array_equal(a, b)
    for bad in (-3, 0, 2.5):
        with pytest.raises(ValueError, match="n_draws"):
            _arviz_data(fit, n_draws=bad)


def test_laplace_draws_come_from_its_gaussian(seed):
    # N(mode, cov) with unequal variances: means within 5 sd / sqrt(n), variances within 5 var sqrt(2 / n): 4
    # comparisons at 5 sd, false alarm < 3e-6
    from bayesnotes.vi import LaplaceResult
    mode, cov, n = np.array([1.0, -2.0]), np.array([[0.25, 0.3], [0.3, 4.0]]), 4000
    x = _arviz_data(LaplaceResult(mode, cov, 0.0), n_draws=n, rng=seed(62))["posterior"]["x"][0]
    v = np.diag(cov)
    assert np.all(np.abs(x.mean(0) - mode) < 5 * np.sqrt(v / n))
    assert np.all(np.abs(x.var(0, ddof=1) - v) < 5 * v * np.sqrt(2 / n))


def test_other_results_are_refused_by_name():
    from bayesnotes.diagnostics import Summary
    with pytest.raises(TypeError, match="Summary"):
        _arviz_data(Summary(*[np.zeros(1)] * len(Summary._fields)))


# --- against ArviZ (make test-arviz) ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def nuts_run(seed):
    sd = np.array([1.0, 2.0, 0.5])
    return sample("nuts", lambda th: -0.5 * anp.sum((th / sd) ** 2), x0=np.zeros((4, 3)), n_warmup=300,
                  n_draws=300, rng=seed(41))


def _agree(az, idata, x, name="x"):
    "ArviZ's R-hat, bulk and tail ESS, MCSE of mean and sd of variable `name` against the book's on draws x (chain, draw, k)."
    for label, ours, theirs in [
            ("rhat", rhat, lambda d: az.rhat(d)), ("ess_bulk", ess_bulk, lambda d: az.ess(d, method="bulk")),
            ("ess_tail", ess_tail, lambda d: az.ess(d, method="tail")),
            ("mcse_mean", mcse_mean, lambda d: az.mcse(d, method="mean")),
            ("mcse_sd", mcse_sd, lambda d: az.mcse(d, method="sd"))]:
        a = np.atleast_1d(np.asarray(theirs(idata)[name].values, float))
        b = np.array([float(ours(x[:, :, i])) for i in range(x.shape[2])])
        if label == "rhat" and x.shape[0] == 1:
            assert np.all(np.isnan(a)) and np.all(np.isfinite(b))    # ArviZ: NaN for one chain; the book splits it
        else:
            np.testing.assert_allclose(a, b, rtol=1e-9, err_msg=label)


def test_mcmc_diagnostics_and_statistics_equal_arviz(nuts_run):
    "R-hat, ESS, MCSE, E-BFMI: ArviZ on to_arviz's data = the book, 1e-9; sample_stats = the run's statistics."
    az = pytest.importorskip("arviz")
    idata = to_arviz(nuts_run)
    x = nuts_run.draws
    assert idata.posterior["x"].shape == x.shape
    _agree(az, idata, x)
    np.testing.assert_allclose(az.bfmi(idata), nuts_run.e_bfmi, rtol=1e-9)
    st, ss = nuts_run.stats, idata.sample_stats
    for name, ours in [("energy", st.energy), ("lp", st.logdensity), ("acceptance_rate", st.accept_prob),
                       ("diverging", st.divergent), ("tree_depth", st.tree_depth), ("n_steps", st.n_grad),
                       ("step_size", np.repeat(nuts_run.step_size[:, None], x.shape[1], 1))]:
        np.testing.assert_array_equal(ss[name].values, ours, err_msg=name)


def test_divergences_and_other_kernels_through_arviz(small_runs, seed):
    az = pytest.importorskip("arviz")
    r = _fake_mcmc("nuts", seed(63), n_draws=50)
    idata = to_arviz(r)
    np.testing.assert_array_equal(idata.sample_stats["diverging"].values, r.stats.divergent)
    for k in ("rwmh", "slice"):
        idata = to_arviz(small_runs[k], var_names=["a", "b"])
        assert "step_size" not in idata.sample_stats and "n_steps" not in idata.sample_stats
        s = az.summary(idata, round_to="none")
        np.testing.assert_allclose(s["r_hat"].values, [rhat(small_runs[k].draws[:, :, i]) for i in range(2)],
                                   rtol=1e-9)


def test_one_chain_and_1d_draws_against_arviz(seed):
    az = pytest.importorskip("arviz")
    rng = np.random.default_rng(seed(64))
    for x in (rng.normal(size=500), rng.normal(size=(1, 400, 2))):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            idata = to_arviz(x)
            _agree(az, idata, np.asarray(x).reshape(1, -1, 1) if np.ndim(x) == 1 else x)


def test_names_dims_coords_and_attrs_reach_arviz(nuts_run):
    az = pytest.importorskip("arviz")
    s = az.summary(to_arviz(nuts_run, var_names=["a", "b", "c"]), round_to="none")
    assert list(s.index) == ["a", "b", "c"]
    np.testing.assert_allclose(s["r_hat"].values, [rhat(nuts_run.draws[:, :, i]) for i in range(3)], rtol=1e-9)
    idata = to_arviz(nuts_run, var_names={"mu": 0, "theta": slice(1, 3)}, dims={"theta": ["k"]},
                     coords={"k": ["u", "v"]})
    assert idata.posterior["theta"].dims == ("chain", "draw", "k")
    assert list(idata.posterior["k"].values) == ["u", "v"] and idata.posterior["mu"].dims == ("chain", "draw")
    res = _Particles(np.arange(20.0), np.ones(20), log_evidence=-1.0)
    idata = to_arviz(res, rng=0)     # only the attributes are compared: the draws do not matter
    assert idata.attrs["weight_ess"] == pytest.approx(20.0) and idata.attrs["n_particles"] == 20


def test_editing_the_inference_data_leaves_the_result_alone(nuts_run):
    pytest.importorskip("arviz")
    before = nuts_run.draws.copy(), nuts_run.stats.logdensity.copy()
    idata = to_arviz(nuts_run, var_names=["a", "b", "c"])
    idata.posterior["a"] += 100.0
    idata.sample_stats["lp"] += 100.0
    np.testing.assert_array_equal(nuts_run.draws, before[0])
    np.testing.assert_array_equal(nuts_run.stats.logdensity, before[1])


def test_the_pin_in_the_error_messages_is_settings_ini_s():
    import configparser
    from pathlib import Path
    from bayesnotes.diagnostics import _ARVIZ_PIN
    cfg = configparser.ConfigParser()
    cfg.read(Path(__file__).resolve().parents[1] / "settings.ini", encoding="utf-8")
    assert cfg["DEFAULT"]["arviz_requirements"].split() == [_ARVIZ_PIN]
