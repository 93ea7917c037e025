"""Checks of bayesnotes.core that must hold across refactors: exact identities, references computed
independently (scipy, quadrature, simulation), and a clear ValueError for bad input to every public function."""
import time
import subprocess
import sys

import numpy as np
import pytest
from scipy import integrate, stats

import autograd.numpy as anp
from bayesnotes import core
from bayesnotes.core import (Adam, NormalGamma, adam, beta_binomial_update, ess, kl_gauss, kl_mc, log_normalize, mvn_logpdf, mvn_sample, normal_gamma_log_evidence, normal_gamma_update, value_and_grad)
from bayesnotes.utils import as_rng, check_count, check_finite, check_positive, check_probability, check_shape, check_spd, track
from bayesnotes.targets import (Target, as_target, banana, breast_cancer_logistic, correlated_gaussian, funnel, gaussian_target, logistic_regression)
from bayesnotes.plotting import figure_functions, new_figure, regenerate_figures, save_figure
from bayesnotes.datasets import load_breast_cancer, load_diabetes, load_digits01, load_iris_2d, load_old_faithful


# ---------------------------------------------------------------- randomness
def test_same_seed_same_result(seed):
    a = mvn_sample([0., 1.], np.eye(2), size=10, rng=seed(5))
    b = mvn_sample([0., 1.], np.eye(2), size=10, rng=np.random.default_rng(seed(5)))
    assert np.array_equal(a, b)
    assert not np.array_equal(a, mvn_sample([0., 1.], np.eye(2), size=10, rng=seed(6)))


@pytest.mark.parametrize("bad", [1.5, "0", True, -1, np.random.RandomState(0)])
def test_as_rng_rejects(bad):
    with pytest.raises(ValueError, match="^rng must be None, a non-negative int seed"):
        as_rng(bad)


def test_as_rng_follows_spec7(seed):
    "None: fresh entropy (two calls differ with probability 1 - 2^-62); int and SeedSequence: reproducible."
    assert as_rng(None).integers(2**62) != as_rng(None).integers(2**62)
    assert as_rng(seed(3)).normal() == as_rng(seed(3)).normal()
    ss = np.random.SeedSequence(seed(4))
    assert as_rng(ss).normal() == np.random.default_rng(np.random.SeedSequence(seed(4))).normal()


def test_check_spd_and_probability():
    S = np.array([[4.0, 1.0], [1.0, 2.0]])
    L = check_spd("S", S)
    assert np.allclose(L @ L.T, S) and np.allclose(L, np.tril(L))
    for bad, msg in (([[1.0, 0.2], [0.0, 1.0]], "S must be symmetric"), ([[1.0, 2.0], [2.0, 1.0]], "S must be positive definite"),
                     (np.ones((2, 3)), "S must be a square matrix"), ([[np.nan]], "S must be finite")):
        with pytest.raises(ValueError, match=msg):
            check_spd("S", bad)
    with pytest.raises(ValueError, match=r"S must have shape \(3, 3\)"):
        check_spd("S", S, 3)
    assert check_probability("p", 0.3) == 0.3
    for bad in (0.0, 1.0, -0.1, np.nan):
        with pytest.raises(ValueError, match="^alpha must"):
            check_probability("alpha", bad)


def test_checks_name_the_argument():
    with pytest.raises(ValueError, match="^alpha must be finite"):
        check_finite("alpha", [1, np.inf])
    with pytest.raises(ValueError, match="^sigma must be positive"):
        check_positive("sigma", 0.0)
    assert check_positive("sigma", 0.0, strict=False) == 0.0
    for bad in (0, -3, 2.5, True, "3", None, np.inf, np.nan):
        with pytest.raises(ValueError, match="^n_draws must be an integer >= 1"):
            check_count("n_draws", bad)
    assert check_count("n", 0, minimum=0) == 0 and isinstance(check_count("n", np.int64(4)), int)
    with pytest.raises(ValueError, match="^theta must have shape"):
        check_shape("theta", np.zeros((2, 3)), (2, 2))


def test_progress_passthrough():
    assert list(track(iter([1, 2]), progress=False)) == [1, 2]
    assert list(track([1, 2], progress=True, disable=True)) == [1, 2]


def test_progress_without_tqdm_writes_a_text_line_to_stderr(monkeypatch, capsys):
    "The lean install has no tqdm: `progress=True` still shows the count (a plain line on stderr), in both ways the book uses a bar."
    monkeypatch.setitem(sys.modules, "tqdm", None)          # `import tqdm.auto` now raises ImportError, as without tqdm
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    assert list(track(range(3), progress=True, desc="advi")) == [0, 1, 2]       # the items, unchanged
    err = capsys.readouterr().err
    assert err.endswith("\n") and "advi: 3/3 (100%)" in err.split("\r")[-1], repr(err)
    bar = track(range(10), progress=True, desc="nuts", total=10, mininterval=0.0)   # as `mcmc.sample` drives it
    for _ in range(4):
        bar.update(1)
    bar.set_postfix(step=0.5)
    bar.close(); bar.close()                                  # a second close draws nothing more
    lines = capsys.readouterr().err.split("\r")[1:]
    assert [l.split(",")[0] for l in lines] == ["nuts: 1/10 (10%)", "nuts: 2/10 (20%)", "nuts: 3/10 (30%)",
                                                "nuts: 4/10 (40%)", "nuts: 4/10 (40%)"], lines
    assert "about" in lines[0] and lines[-1].endswith("step=0.5\n")
    assert list(track(iter("ab"), progress=True)) == ["a", "b"] and "2, " in capsys.readouterr().err   # no total: a count
    assert list(track([1, 2], progress=True, disable=True)) == [1, 2] and capsys.readouterr().err == ""
    assert list(track([1, 2], progress=False)) == [1, 2] and capsys.readouterr().err == ""


# ---------------------------------------------------------------- log weights
def test_log_normalize_and_ess_properties(seed):
    rng = np.random.default_rng(seed(0))
    for _ in range(20):
        lw = rng.normal(scale=5, size=50) + rng.normal(scale=300)   # arbitrary offset: invariance
        W, lse = log_normalize(lw)
        assert np.isclose(W.sum(), 1) and np.all(W >= 0)   # invariant: normalised weights are non-negative
        from scipy.special import logsumexp
        assert np.isclose(lse, logsumexp(lw)) and np.allclose(W, np.exp(lw - logsumexp(lw)))
        e = ess(lw)
        assert 1 - 1e-9 <= e <= 50 + 1e-9   # invariant: ESS lies in [1, N]
        assert np.isclose(e, ess(lw + 123.0))
    assert np.isclose(ess(np.zeros(7)), 7)
    assert np.isclose(ess(np.r_[0.0, np.full(9, -np.inf)]), 1)


@pytest.mark.parametrize("bad,msg", [([], "non-empty"), (np.zeros((2, 2)), "1-d"), ([0, np.nan], "NaN"),
                                     ([0, np.inf], r"\+inf"), ([-np.inf] * 3, "-inf everywhere")])
def test_log_weights_bad_input(bad, msg):
    with pytest.raises(ValueError, match=msg):
        log_normalize(bad)
    with pytest.raises(ValueError, match=msg):
        ess(bad)


# ---------------------------------------------------------------- Gaussians
def test_mvn_logpdf_matches_scipy_and_shapes(seed):
    rng = np.random.default_rng(seed(1))
    A = rng.normal(size=(4, 4)); S = A @ A.T + 0.5 * np.eye(4); m = rng.normal(size=4)
    X = rng.normal(size=(3, 5, 4))
    assert mvn_logpdf(X, m, S).shape == (3, 5)
    assert np.allclose(mvn_logpdf(X, m, S), stats.multivariate_normal(m, S).logpdf(X))
    assert np.isclose(mvn_logpdf(np.array([0.3]), [0.], 2.0), stats.norm(0, np.sqrt(2)).logpdf(0.3))


def test_mvn_sample_moments():
    S = np.array([[2., -.7], [-.7, 1.]])
    n = 50000
    x = mvn_sample([1., 2.], S, size=n, rng=3)
    assert x.shape == (n, 2)
    se_mean = np.sqrt(np.diag(S) / n)
    assert np.all(np.abs(x.mean(0) - [1, 2]) < 5.3 * se_mean)   # false alarm <= 1e-6: 5.3 se covers up to 10 comparisons
    # sample covariance entries: SE of S_ij is sqrt((S_ii S_jj + S_ij^2) / n) for Gaussian data
    C = np.cov(x.T)
    se_cov = np.sqrt((np.outer(np.diag(S), np.diag(S)) + S**2) / n)
    assert np.all(np.abs(C - S) < 5.3 * se_cov)   # false alarm <= 1e-6: 5.3 se covers up to 10 comparisons


@pytest.mark.parametrize("kw,msg", [
    (dict(mean=[0., np.nan], cov=np.eye(2)), "mean must be finite"),
    (dict(mean=np.zeros((2, 1)), cov=np.eye(2)), "mean must be 1-d"),
    (dict(mean=[0., 0.], cov=np.eye(3)), r"cov must have shape"),
    (dict(mean=[0., 0.], cov=[[1., 0.5], [0.4, 1.]]), "symmetric"),
    (dict(mean=[0., 0.], cov=[[1., 2.], [2., 1.]]), "positive definite"),
])
def test_mvn_bad_input(kw, msg):
    with pytest.raises(ValueError, match=msg):
        mvn_logpdf(np.zeros(2), **kw)
    with pytest.raises(ValueError, match=msg):
        mvn_sample(size=3, rng=0, **kw)


def test_mvn_bad_x_and_size():
    with pytest.raises(ValueError, match="x must have last dimension 2"):
        mvn_logpdf(np.zeros(3), [0., 0.], np.eye(2))
    with pytest.raises(ValueError, match="x must be finite"):
        mvn_logpdf([np.nan, 0.], [0., 0.], np.eye(2))
    for size in (0, -1, 2.5):
        with pytest.raises(ValueError, match="size"):
            mvn_sample([0.], [[1.]], size=size, rng=0)


# ---------------------------------------------------------------- KL
def test_kl_gauss_properties_and_quadrature(seed):
    rng = np.random.default_rng(seed(2))
    for d in (1, 3):
        A = rng.normal(size=(d, d)); S0 = A @ A.T + np.eye(d)
        B = rng.normal(size=(d, d)); S1 = B @ B.T + np.eye(d)
        m0, m1 = rng.normal(size=d), rng.normal(size=d)
        assert kl_gauss(m0, S0, m1, S1) > 0   # invariant: KL of two different Gaussians is positive
        assert np.isclose(kl_gauss(m0, S0, m0, S0), 0, atol=1e-12)
    # 1-d: against numerical integration of q log(q/p)
    q, p = stats.norm(0.3, 0.8), stats.norm(-1.0, 1.7)
    ref, _ = integrate.quad(lambda x: q.pdf(x) * (q.logpdf(x) - p.logpdf(x)), -20, 20)
    assert np.isclose(kl_gauss(0.3, 0.64, -1.0, 1.7**2), ref, rtol=1e-8)


def test_kl_mc_agrees_with_closed_form():
    m0, S0 = np.array([0., 1.]), np.array([[1., .5], [.5, 2.]])
    m1, S1 = np.array([1., 0.]), np.array([[2., -.3], [-.3, 1.]])
    xs = mvn_sample(m0, S0, size=20000, rng=11)
    est, se = kl_mc(lambda x: mvn_logpdf(x, m0, S0), lambda x: mvn_logpdf(x, m1, S1), xs)
    assert abs(est - kl_gauss(m0, S0, m1, S1)) < 4.9 * se   # CLT: 4.9 se, false alarm 1e-6


def test_kl_bad_input():
    with pytest.raises(ValueError, match="same length"):
        kl_gauss([0., 0.], np.eye(2), [0.], 1.)
    with pytest.raises(ValueError, match="S1 must be positive definite"):
        kl_gauss(0., 1., 0., -1.)
    with pytest.raises(ValueError, match="m0 must be finite"):
        kl_gauss(np.nan, 1., 0., 1.)
    with pytest.raises(ValueError, match="at least two draws"):
        kl_mc(np.log, np.log, np.ones(1))
    with pytest.raises(ValueError, match=r"logq\(samples\) - logp\(samples\) must be finite"):
        kl_mc(lambda x: np.log(x[:, 0]), lambda x: 0 * x[:, 0], -np.ones((5, 1)))


# ---------------------------------------------------------------- conjugacy
def test_beta_binomial_against_bayes_rule_on_grid():
    a, b = beta_binomial_update(2., 3., 4, 10)
    th = np.linspace(1e-4, 1 - 1e-4, 20001)
    un = stats.beta.pdf(th, 2, 3) * stats.binom.pmf(4, 10, th)
    post = un / np.trapezoid(un, th)
    assert np.allclose(post, stats.beta.pdf(th, a, b), atol=1e-5)


@pytest.mark.parametrize("args,msg", [((0, 1, 1, 2), "a must be positive"), ((1, -1, 1, 2), "b must be positive"),
                                      ((1, 1, 3, 2), "k must be"), ((1, 1, 1, 2.5), "n must be"),
                                      ((1, 1, -1, 2), "k must be")])
def test_beta_binomial_bad_input(args, msg):
    with pytest.raises(ValueError, match=msg):
        beta_binomial_update(*args)


def test_normal_gamma_posterior_matches_sequential_and_evidence_chain_rule(seed):
    x = np.random.default_rng(seed(4)).normal(2.0, 1.5, size=12)
    prior = (0.0, 0.5, 2.0, 3.0)
    post = normal_gamma_update(x, *prior)
    # updating one point at a time gives the same posterior (exactness of conjugacy)
    p = prior
    for xi in x:
        p = tuple(normal_gamma_update(np.array([xi]), *p))
    assert np.allclose(p, tuple(post))
    # chain rule: log p(x) = sum_i log p(x_i | x_<i)
    lz, p = 0.0, prior
    for xi in x:
        lz += normal_gamma_log_evidence(np.array([xi]), *p)
        p = tuple(normal_gamma_update(np.array([xi]), *p))
    assert np.isclose(lz, normal_gamma_log_evidence(x, *prior))
    # marginal moments against simulation from the posterior
    rng = np.random.default_rng(seed(0))
    tau = rng.gamma(post.a, 1 / post.b, size=200000)
    mu = rng.normal(post.mu, 1 / np.sqrt(post.kappa * tau))
    assert abs(mu.mean() - post.mean_mu) < 4.9 * mu.std() / np.sqrt(mu.size)   # CLT: 4.9 se, false alarm 1e-6
    assert abs(tau.mean() - post.mean_tau) < 4.9 * tau.std() / np.sqrt(tau.size)   # CLT: 4.9 se, false alarm 1e-6
    # mu's marginal is Student t with 2a degrees of freedom: kurtosis k = 3 + 6 / (2a - 4), and a sample variance has
    # relative SE sqrt((k - 1) / n); 4.9 of them (0.017 here): false alarm 1e-6
    k = 3 + 6 / (2 * post.a - 4)
    assert abs(mu.var() / post.var_mu - 1) < 4.9 * np.sqrt((k - 1) / mu.size)
    ng = NormalGamma(0.3, 2.0, 3.0, 1.5)
    mu_, tau_ = np.array([-1.0, 0.3, 2.0]), np.array([0.5, 1.0, 4.0])
    ref = stats.gamma.logpdf(tau_, 3.0, scale=1 / 1.5) + stats.norm.logpdf(mu_, 0.3, 1 / np.sqrt(2.0 * tau_))
    assert np.allclose(ng.logpdf(mu_, tau_), ref)
    assert NormalGamma(0, 1, 0.5, 1).var_mu == np.inf
    assert NormalGamma(0, 1, 2, 1).logpdf(0.0, -1.0) == -np.inf


@pytest.mark.parametrize("kw,msg", [(dict(x=[]), "non-empty"), (dict(x=np.ones((2, 2))), "1-d"),
                                    (dict(x=[1., np.nan]), "x must be finite"), (dict(mu0=np.inf), "mu0"),
                                    (dict(kappa0=0.), "kappa0"), (dict(a0=-1.), "a0"), (dict(b0=0.), "b0")])
def test_normal_gamma_bad_input(kw, msg):
    args = dict(x=[1., 2.], mu0=0., kappa0=1., a0=1., b0=1.) | kw
    with pytest.raises(ValueError, match=msg):
        normal_gamma_update(**args)
    with pytest.raises(ValueError, match=msg):
        normal_gamma_log_evidence(**args)


# ---------------------------------------------------------------- targets
@pytest.mark.parametrize("make", [lambda: correlated_gaussian(0.7, (1., 3.)), lambda: banana(0.2, 3.),
                                  lambda: funnel(4, 1.5),
                                  lambda: logistic_regression(*load_iris_2d(standardize=True), 2.0)])
def test_target_gradients_by_finite_differences(make, seed):
    t = make()
    rng = np.random.default_rng(seed(0))
    for _ in range(3):
        x = rng.normal(size=t.dim) * 0.5
        fd = np.array([(t.logdensity(x + h) - t.logdensity(x - h)) / 2e-6 for h in 1e-6 * np.eye(t.dim)])
        assert np.allclose(t.grad(x), fd, rtol=1e-5, atol=1e-6)
    X = rng.normal(size=(5, t.dim)) * 0.5
    v, G = t.value_and_grad_batch(X)
    assert v.shape == (5,) and G.shape == (5, t.dim)
    assert np.allclose(G, [t.grad(x) for x in X]) and np.allclose(v, [t.logdensity(x) for x in X])


@pytest.mark.parametrize("make", [lambda: correlated_gaussian(0.7, (1., 3.)), lambda: banana(0.2, 3.),
                                  lambda: gaussian_target([1., 0., -1.], cov=[[2., .5, 0.], [.5, 1., .2], [0., .2, .5]]),
                                  lambda: gaussian_target(np.arange(4.), sd=[.1, 1., 2., 5.]),
                                  lambda: funnel(4, 1.5), lambda: breast_cancer_logistic(0.5),
                                  lambda: logistic_regression(*load_iris_2d(standardize=True), 2.0)])
def test_closed_form_gradients_match_autograd(make, seed):
    """The library's models supply value and gradient in closed form (`vg_batch`, plain numpy); both agree with
    autograd on the same log density to 1e-10, for one point and for a batch, including far from the mode."""
    t = make()
    ag = t.with_autograd()
    assert t.closed_form and not ag.closed_form and ag.dim == t.dim
    rng = np.random.default_rng(seed(0))
    for scale in (0.3, 3.):
        X = rng.normal(size=(7, t.dim)) * scale
        (v, G), (va, Ga) = t.value_and_grad_batch(X), ag.value_and_grad_batch(X)
        assert v.shape == (7,) and G.shape == (7, t.dim)
        assert np.allclose(v, va, rtol=1e-12, atol=1e-10) and np.allclose(G, Ga, rtol=1e-12, atol=1e-10)
        v1, g1 = t.value_and_grad(X[0])
        assert isinstance(v1, float) and np.isclose(v1, va[0], rtol=1e-12) and np.allclose(g1, Ga[0], rtol=1e-12, atol=1e-10)
    with pytest.raises(ValueError, match="vg_batch"):
        Target(t.fn, t.dim, vg_batch=1.0)


def test_gaussian_target_matches_scipy_and_rejects_bad_input(seed):
    rng = np.random.default_rng(seed(0))
    A = rng.normal(size=(4, 4)); S = A @ A.T + 4 * np.eye(4); mu = rng.normal(size=4)
    t = gaussian_target(mu, cov=S)
    X = rng.normal(size=(6, 4))
    assert np.allclose(t.value_and_grad_batch(X)[0], stats.multivariate_normal(mu, S).logpdf(X))
    assert np.allclose(t.value_and_grad_batch(X)[1], -(X - mu) @ np.linalg.inv(S))
    ts = gaussian_target(sd=[0.5, 2.])
    assert np.allclose(ts.value_and_grad_batch(X[:, :2])[0], stats.norm(0, [0.5, 2.]).logpdf(X[:, :2]).sum(1))
    assert np.allclose(ts.cov, np.diag([0.25, 4.])) and np.array_equal(ts.mean, np.zeros(2))
    with pytest.raises(ValueError, match="exactly one of cov and sd"): gaussian_target(mu)
    with pytest.raises(ValueError, match="exactly one of cov and sd"): gaussian_target(mu, cov=S, sd=np.ones(4))
    with pytest.raises(ValueError, match="sd"): gaussian_target(sd=[1., -1.])
    with pytest.raises(ValueError, match="cov must be positive definite"): gaussian_target(cov=[[1., 2.], [2., 1.]])
    with pytest.raises(ValueError, match="mean must have shape"): gaussian_target(np.zeros(3), cov=S)


def test_targets_are_normalised_where_claimed():
    for t in (correlated_gaussian(0.6, (1., 2.)), banana(0.3, 2.)):
        Z, _ = integrate.dblquad(lambda b, a: np.exp(t.logdensity(np.array([a, b]))), -12, 12, -40, 60)
        assert np.isclose(Z, 1, atol=1e-6)
    f = funnel(2, 1.0)
    Z, _ = integrate.quad(lambda v: integrate.quad(lambda x: np.exp(f.logdensity(np.array([v, x]))),
                                                   -15 * np.exp(v / 2), 15 * np.exp(v / 2))[0], -9, 9)
    assert np.isclose(Z, 1, atol=1e-6)


def test_funnel_and_banana_moments_by_quadrature():
    f = funnel(2, 1.0)
    # nested quadrature with the inner range scaled to the conditional sd e^{v/2} (the neck is very narrow)
    inner = lambda v: integrate.quad(lambda x: x**2 * np.exp(f.logdensity(np.array([v, x]))),
                                     -15 * np.exp(v / 2), 15 * np.exp(v / 2))[0]
    var_x, _ = integrate.quad(inner, -9, 9)
    assert np.isclose(var_x, f.cov[1, 1], rtol=1e-5)
    b = banana(0.3, 2.)
    m2, _ = integrate.dblquad(lambda y, x: y * np.exp(b.logdensity(np.array([x, y]))), -12, 12, -40, 60)
    v2, _ = integrate.dblquad(lambda y, x: y**2 * np.exp(b.logdensity(np.array([x, y]))), -12, 12, -40, 60)
    assert abs(m2) < 1e-6 and np.isclose(v2, b.cov[1, 1], rtol=1e-5)


def test_logistic_regression_likelihood_against_scipy():
    X, y = load_iris_2d(standardize=True)
    X = np.c_[np.ones(len(X)), X]
    t = logistic_regression(X, y, prior_scale=1.5)
    w = np.array([0.2, -1.0, 0.5])
    eta = X @ w
    ref = stats.bernoulli.logpmf(y, 1 / (1 + np.exp(-eta))).sum() + stats.norm(0, 1.5).logpdf(w).sum()
    assert np.isclose(t.logdensity(w), ref)
    bc = breast_cancer_logistic()
    assert bc.dim == 31 and np.isfinite(bc.logdensity(np.zeros(31)))


def test_target_hessian_and_raw_fn():
    t = correlated_gaussian(0.8, (1., 2.))
    assert np.allclose(t.hessian(np.array([0.3, -1.])), -np.linalg.inv(t.cov))
    # a target with a user gradient: Hessian by central differences of that gradient
    P = np.linalg.inv(t.cov)
    t2 = Target(lambda x: -0.5 * x @ P @ x, 2, grad=lambda x: -P @ x)
    assert np.allclose(t2.hessian(np.array([1., 2.])), -P, atol=1e-6)
    import autograd
    g = autograd.grad(lambda x: 2.0 * t.fn(x))(np.array([1., 1.]))
    assert np.allclose(g, 2 * t.grad(np.array([1., 1.])))


def test_target_bad_input():
    with pytest.raises(ValueError, match="logdensity must be callable"):
        Target(3.0, 1)
    with pytest.raises(ValueError, match="dim must be an integer >= 1"):
        Target(lambda x: 0.0, 0)
    with pytest.raises(ValueError, match="mean must have shape"):
        Target(lambda x: 0.0, 2, mean=np.zeros(3))
    with pytest.raises(ValueError, match="dim is required"):
        as_target(lambda x: 0.0)
    with pytest.raises(ValueError, match="has dimension 2, but dim=3"):
        as_target(correlated_gaussian(), dim=3)
    with pytest.raises(ValueError, match="target must be a Target or a callable"):
        as_target(5, dim=1)
    t = as_target(lambda x: anp.log(x[0]) - x[0], dim=1)
    with pytest.raises(ValueError, match="x0 must have shape"):
        t.check_point(np.zeros(2))
    with pytest.raises(ValueError, match="x0 must be finite"):
        t.check_point(np.array([np.nan]))
    with pytest.raises(ValueError, match="log density at x0 is not finite"):
        t.check_point(np.array([-1.0]))
    with pytest.raises(ValueError, match="rho"):
        correlated_gaussian(1.0)
    with pytest.raises(ValueError, match="scales"):
        correlated_gaussian(0.5, (1., 2., 3.))
    with pytest.raises(ValueError, match="s1"):
        banana(0.1, -1.)
    with pytest.raises(ValueError, match="dim"):
        funnel(1)
    with pytest.raises(ValueError, match="scale"):
        funnel(3, 0.)
    X = np.ones((4, 2))
    with pytest.raises(ValueError, match="X must be 2-d"):
        logistic_regression(np.ones(4), np.zeros(4))
    with pytest.raises(ValueError, match="y must have shape"):
        logistic_regression(X, np.zeros(3))
    with pytest.raises(ValueError, match="y must contain only 0 and 1"):
        logistic_regression(X, np.array([0, 1, 2, 1]))
    with pytest.raises(ValueError, match="prior_scale"):
        logistic_regression(X, np.zeros(4), prior_scale=0)
    with pytest.raises(ValueError, match="X must be finite"):
        logistic_regression(X * np.nan, np.zeros(4))


def test_value_and_grad():
    f = value_and_grad(lambda x: anp.sum(x**3))
    v, g = f([1.0, 2.0])
    assert v == 9.0 and np.allclose(g, [3, 12])


# ---------------------------------------------------------------- data
def test_datasets():
    F = load_old_faithful()
    assert F.shape == (272, 2) and np.all(F > 0)
    assert 1.5 < F[:, 0].min() < 2 and 90 < F[:, 1].max() < 100
    X, y = load_breast_cancer(standardize=False, intercept=False)
    assert X.shape == (569, 30) and y.sum() == 357
    Xs, _ = load_breast_cancer()
    assert np.allclose(Xs[:, 0], 1) and np.allclose(Xs[:, 1:].mean(0), 0) and np.allclose(Xs[:, 1:].std(0), 1)
    Xi, yi = load_iris_2d(pair=None, features=(2, 3))
    assert Xi.shape == (150, 2) and yi.sum() == 50
    with pytest.raises(ValueError, match="pair must name iris species"):
        load_iris_2d(pair=("setosa", "rose"))
    Xr, yr = load_diabetes(standardize=False)
    assert Xr.shape == (442, 10) and yr.min() > 0
    D, lab = load_digits01()
    assert D.shape == (1797, 64) and set(lab) == set(range(10))


# ---------------------------------------------------------------- Adam
def test_adam_matches_reference_update_and_converges():
    # first step of Adam is lr * sign(g) (bias correction makes mhat/sqrt(vhat) = g/|g|)
    opt = Adam(lr=0.1)
    assert np.allclose(opt.step(np.zeros(3), np.array([2., -0.5, 1e-3])), [0.1, -0.1, 0.1], atol=1e-6)
    # maximise a concave quadratic with a known optimum
    A = np.array([[3., 1.], [1., 2.]]); b = np.array([1., -1.])
    x, _ = adam(lambda x: b - A @ x, np.zeros(2), n_iter=4000, lr=0.02)
    assert np.allclose(x, np.linalg.solve(A, b), atol=1e-4)


def test_adam_bad_input():
    for kw, msg in [(dict(lr=0), "lr"), (dict(lr=np.nan), "lr"), (dict(b2=1.0), "b2"), (dict(eps=-1), "eps")]:
        with pytest.raises(ValueError, match=msg):
            Adam(**kw)
    with pytest.raises(ValueError, match="grad must have the shape"):
        Adam().step(np.zeros(2), np.zeros(3))
    with pytest.raises(ValueError, match="grad is not finite"):
        Adam().step(np.zeros(2), np.array([np.nan, 0]))
    with pytest.raises(ValueError, match="n_iter"):
        adam(lambda x: x, np.zeros(1), n_iter=0)
    with pytest.raises(ValueError, match="x0 must be finite"):
        adam(lambda x: x, [np.inf], n_iter=1)


# ---------------------------------------------------------------- figures
def test_figures_and_regeneration(tmp_path):
    from matplotlib.figure import Figure
    fig, ax = new_figure()
    assert isinstance(fig, Figure)
    fns = figure_functions(core)
    assert fns and all(n.startswith("fig_") for n in fns)
    paths = regenerate_figures(core, tmp_path / "core", formats=("png", "svg"), progress=False)
    assert len(paths) == 2 * len(fns) and all(p.stat().st_size > 500 for p in paths)
    assert {p.suffix for p in paths} == {".png", ".svg"}
    assert save_figure(fig, tmp_path / "x" / "y", ("png",))[0].exists()
    with pytest.raises(ValueError, match="no fig_"):
        import types
        regenerate_figures(types.ModuleType("empty"), tmp_path)


def test_import_is_fast():
    """`import bayesnotes` loads none of the heavy stack (scipy, matplotlib, autograd, scikit-learn, tqdm, IPython):
    each chapter module imports what it needs. Checked on the modules loaded, not on a time, which depends on the
    machine; the time is only a loose smoke bound."""
    code = ("import sys, time; t = time.perf_counter(); import bayesnotes; t = time.perf_counter() - t; "
            "heavy = ('scipy', 'matplotlib', 'autograd', 'sklearn', 'tqdm', 'IPython', 'ipywidgets'); "
            "print(t, ','.join(m for m in heavy if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert len(out) == 1, f"import bayesnotes loaded {out[1]}"
    assert float(out[0]) < 5, f"import bayesnotes took {float(out[0]):.2f} s"


@pytest.mark.parametrize("call", [
    lambda: __import__("bayesnotes.mcmc", fromlist=["hmc"]).hmc(correlated_gaussian(), n_steps=np.inf),
    lambda: __import__("bayesnotes.mcmc", fromlist=["nuts"]).nuts(correlated_gaussian(), max_depth=np.nan),
    lambda: __import__("bayesnotes.vae", fromlist=["VAE"]).VAE(latent_dim=np.inf),
    lambda: __import__("bayesnotes.bnn", fromlist=["toy_regression_data"]).toy_regression_data(np.inf, 0),
    lambda: __import__("bayesnotes.smc", fromlist=["systematic"]).systematic(np.ones(4) / 4, M=np.nan, rng=0),
])
def test_non_finite_counts_get_a_named_error(call):
    "Chapters validate counts with utils.check_count: inf/nan give a ValueError naming the argument."
    with pytest.raises(ValueError, match="must be an integer >= "):
        call()


def test_cache_seeded_caches_int_seeds_and_nothing_else():
    "One memoiser for every cached run of the book: int seeds (also numpy ints, by keyword or position) share one entry; None, SeedSequence and Generator run afresh."
    from bayesnotes.utils import cache_seeded, int_seed
    calls = []

    @cache_seeded(maxsize=4)
    def run(n, rng=0, data_rng=1):
        calls.append((n, rng, data_rng))
        return as_rng(rng).normal(size=n) + as_rng(data_rng).normal()

    a = run(2, 5)
    assert run(2, rng=np.int64(5)) is a and run(2, 5, 1) is a and len(calls) == 1
    assert run(2, 5, data_rng=2) is not a and len(calls) == 2                  # every random argument is part of the key
    g = np.random.default_rng(0)
    assert not np.array_equal(run(2, g), run(2, g)) and len(calls) == 4          # a Generator is used, never looked up
    run(2, None); run(2, np.random.SeedSequence(1)); assert len(calls) == 6
    assert run.cache_info().currsize == 2

    @cache_seeded(copy=True)
    def table(rng=0): return {"x": [int_seed(rng)]}
    t = table(3); t["x"].append(99)
    assert table(3) == {"x": [3]}                                                 # a caller's change never reaches the cache
    with pytest.raises(ValueError, match="no argument named rng"):
        cache_seeded()(lambda n: n)


def test_cache_seeded_shares_the_cache_of_a_notebook_redefinition():
    "A chapter notebook redefines every function it exports (module __main__): an identical redefinition shares the package function's cache; an edited one, or a function of the notebook's own, does not."
    import textwrap
    from bayesnotes.utils import cache_seeded
    src = textwrap.dedent('''
        @cache_seeded(maxsize=4)
        def fit(n, rng=0):
            calls.append((__name__, n))
            return as_rng(rng).normal(size=n)
        ''')
    calls = []                                             # one log, seen by every copy (a global list is data: a copy
    def define(module_name, source=src):                   # with a list of its own would not share)
        ns = {"__name__": module_name, "cache_seeded": cache_seeded, "as_rng": as_rng, "calls": calls}
        exec(compile(source, f"<{module_name}>", "exec"), ns)
        return ns
    pkg = define("bayesnotes._test_shared_cache")         # the package's copy, defined first (imported at the top)
    a = pkg["fit"](3, 7)
    nb = define("__main__")                                # the notebook's export cell, run later
    assert nb["fit"](3, 7) is a and len(calls) == 1 and nb["fit"].cache_info().hits == 1
    edited = define("__main__", src.replace("normal", "uniform"))      # the reader changed it: computed afresh
    assert not np.array_equal(edited["fit"](3, 7), a) and len(calls) == 2
    other = define("bayesnotes._another_module")           # package code elsewhere: never shares with a package function
    assert other["fit"](3, 7) is not a and len(calls) == 3
    again = define("__main__")                             # now two package functions match: ambiguous, so no sharing
    assert again["fit"](3, 7) is not a and len(calls) == 4


def _define(module_name, source, **names):
    from bayesnotes.utils import cache_seeded
    ns = {"__name__": module_name, "cache_seeded": cache_seeded, "as_rng": as_rng, **names}
    exec(compile(source, f"<{module_name}>", "exec"), ns)
    return ns


def test_cache_seeded_sees_a_notebook_edit_to_a_helper():
    "Review 00a item 1: an identical redefinition shared the package's cache even when a helper it calls was edited, and so ran the package's helper, on new seeds too."
    import textwrap
    src = textwrap.dedent('''
        SCALE = 2
        def helper(x): return x * SCALE
        class Box:
            def __init__(self, v): self.v = helper(v)
        @cache_seeded()
        def fit(n, rng=0, scale=1): return Box(as_rng(rng).normal() * scale).v
        ''')
    pkg = _define("bayesnotes._test_helper_edit", src)
    a = pkg["fit"](1, rng=5)
    same = _define("__main__", src)                                   # an identical copy, helpers and class too
    assert same["fit"](1, rng=5) is a and same["fit"].cache_info().hits == 1
    for edit in ("def helper(x): return 1000.0",                      # the helper it calls (through a class)
                 "SCALE = 2.0",                                       # a constant it reads: 2 and 2.0 differ
                 "class Box:\n    def __init__(self, v): self.v = -helper(v)"):    # the class it builds
        nb = _define("__main__", src + edit + "\n")                  # edited after fit was defined
        for seed in (5, 6):                                           # the cached seed and a new one
            assert nb["fit"](1, rng=seed) == nb["fit"].__wrapped__(1, rng=seed), edit
    nb = _define("__main__", src)                                     # identical at first: shares ...
    assert nb["fit"](1, rng=5) is a
    exec("def helper(x): return 1000.0", nb)                          # ... until the reader reruns an edited helper cell
    assert nb["fit"](1, rng=5) == 1000.0 and nb["fit"](1, rng=6) == 1000.0
    assert pkg["fit"](1, rng=5) is a                                  # the package's cache is left alone


def test_cache_seeded_keys_are_typed():
    "Review 00a item 1: 1, 1.0 and True were one cache entry, and defaults or constants 1 / True, 2 / 2.0 one cache."
    import textwrap
    src = "@cache_seeded()\ndef fit(n, rng=0, scale=1): return (n, as_rng(rng).normal() * scale * 2)\n"
    pkg = _define("bayesnotes._test_typed", src)
    outs = [pkg["fit"](v, rng=5) for v in (1, 1.0, True)]
    assert [type(o[0]) for o in outs] == [int, float, bool] and pkg["fit"].cache_info().misses == 3
    for edit in (src.replace("scale=1", "scale=True"), src.replace("* 2)", "* 2.0)")):
        nb = _define("__main__", edit)
        nb["fit"](1, rng=5)
        assert nb["fit"].cache_info().hits == 0 and nb["fit"].cache_info().misses == 1, edit


# ---------------------------------------------------------------- review 00_foundations: traps that are now closed
def test_spawn_rng_streams_overlap_for_int_seeds_and_k_is_checked(seed):
    "Int seeds keep rng + k (the book's numbers depend on it), so stream 1 of s is seed s + 1; bad k raised no error before."
    from bayesnotes.utils import spawn_rng
    s = seed(0)
    assert spawn_rng(s, 3) == s + 3 and spawn_rng(s, 0) == s and spawn_rng(np.int64(s), 2.0) == s + 2
    assert as_rng(spawn_rng(s, 1)).random() == as_rng(s + 1).random()           # the documented overlap
    for bad in (-3, 1.5, None, True):                                             # old code: -1, 2, TypeError, 1
        with pytest.raises(ValueError, match="^k must be an integer >= 0"):
            spawn_rng(s, bad)
    with pytest.raises(ValueError, match="^k must be"):
        spawn_rng(np.random.default_rng(s), -1)                                   # old code ignored k here
    assert isinstance(spawn_rng(np.random.default_rng(s), 1), np.random.Generator)


def test_cache_seeded_runs_calls_with_unhashable_arguments_uncached(seed):
    "Old code: TypeError (unhashable ndarray) on exactly the int-seed path that the book uses for reproducible runs."
    from bayesnotes.utils import cache_seeded
    calls = []

    @cache_seeded()
    def shifted(X, rng=0):
        calls.append(1)
        return X + as_rng(rng).normal(size=X.shape)

    a, b = shifted(np.zeros(3), seed(1)), shifted(np.zeros(3), rng=seed(1))
    assert np.array_equal(a, b) and len(calls) == 2 and shifted.cache_info().currsize == 0


def test_blas_threads_limits_only_inside_the_with_block():
    "Old code applied the limit when called: a bare `blas_threads(1)` left BLAS at one thread for the session."
    from threadpoolctl import threadpool_info, threadpool_limits
    from bayesnotes.utils import blas_threads
    counts = lambda: [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
    with threadpool_limits(2, user_api="blas"):
        before = counts()
        if not before or max(before) < 2:
            pytest.skip("no BLAS pool that can run two threads here")
        cm = blas_threads(1)
        assert counts() == before
        with cm:
            assert set(counts()) == {1}
        assert counts() == before
    with pytest.raises(ValueError, match="^n must be"):
        blas_threads(0)                       # still checked at the call


def test_adam_warns_when_the_iterate_is_still_travelling():
    "Old code returned x = (20.9, -1) from x0 = (30, 0) silently: 1000 steps of lr = 0.01 cannot cover 27 units."
    import warnings
    g = lambda z: np.array([-2 * (z[0] - 3), -20 * (z[1] + 1)])
    with pytest.warns(core.ConvergenceWarning, match="coordinate 0 was still moving.*raise n_iter or lr"):
        x, _ = adam(g, np.array([30., 0.]))
    assert x[0] > 15                                                              # indeed far from 3
    with warnings.catch_warnings():
        warnings.simplefilter("error", core.ConvergenceWarning)
        x, _ = adam(g, np.zeros(2), n_iter=3000, lr=0.05)                       # converged: no warning
    assert np.allclose(x, [3, -1], atol=1e-3)


def test_bad_input_found_by_the_review_is_named():
    "Each case returned NaN, a wrong shape, or an error that did not name the argument before."
    opt = Adam(lr=0.1); opt.step(np.zeros(2), np.ones(2))
    with pytest.raises(ValueError, match="^params must keep the shape"):
        opt.step(np.zeros(1), np.ones(1))                                          # old: broadcast to shape (2,)
    for bad in (np.nan, None, np.inf):
        with pytest.raises(ValueError, match="^k must be an integer between 0 and n=10"):
            beta_binomial_update(1, 1, bad, 10)
    assert beta_binomial_update(1, 1, 2.0, 10) == (3.0, 9.0) and beta_binomial_update(1, 1, np.int64(2), 10) == (3.0, 9.0)
    with pytest.raises(ValueError, match="^mu must not be NaN"):
        NormalGamma(0., 1., 1., 1.).logpdf(np.nan, 1.)                             # old: nan
    with pytest.raises(ValueError, match="^NormalGamma.kappa must be positive"):
        NormalGamma(0., -1., 1., 1.).logpdf(0., 1.)                                # old: nan
    assert NormalGamma(0., 1., 2., 1.).logpdf(0., -1.) == -np.inf                  # outside the support: still -inf
    with pytest.raises(ValueError, match="^x must be a number"):
        check_finite("x", "abc")                                                   # old: numpy's message, no name
    t = Target(lambda x: -0.5 * anp.sum(x**2), 2)
    with pytest.raises(ValueError, match=r"^x must have shape \(2,\)"):
        t.value_and_grad(np.ones(3))                                               # old: a value
    v, g = t.value_and_grad_batch(np.ones((2, 3, 2)))
    assert v.shape == (2, 3) and g.shape == (2, 3, 2) and np.allclose(v, -1.0)    # old: values of shape (2,)
    assert t.value_and_grad_batch(np.ones((4, 2)))[0].shape == (4,)
    gt = gaussian_target(mean=1., cov=2.0)                                         # old: "cov must have shape (1, 1), got ()"
    assert np.isclose(gt.logdensity([1.5]), stats.norm(1., np.sqrt(2.)).logpdf(1.5)) and gt.cov.shape == (1, 1)
    for kw, msg in ((dict(pair=("setosa",)), "^pair must name two different"), (dict(features=(0, 9)), "^features must be")):
        with pytest.raises(ValueError, match=msg):
            load_iris_2d(**kw)                                                     # old: IndexError


def test_regenerate_all_finds_every_figure_module_and_reports_import_errors(tmp_path, monkeypatch):
    """Old code: the default ran only the 11 names of CHAPTERS (16 figure modules skipped) and skipped, without a word, a
    chapter whose import raised ModuleNotFoundError. Here the package path holds two fake chapters only."""
    import bayesnotes
    from bayesnotes import plotting
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "zz_fig.py").write_text("from bayesnotes.plotting import new_figure\ndef fig_one():\n    return new_figure()[0]\n")
    monkeypatch.setattr(bayesnotes, "__path__", [str(tmp_path / "pkg")])
    monkeypatch.setattr(plotting, "CHAPTERS", [])           # the old default list: empty, so only discovery can find zz_fig
    for m in ("bayesnotes.zz_fig", "bayesnotes.zz_broken"):
        monkeypatch.delitem(sys.modules, m, raising=False)
    assert plotting.figure_modules() == ["zz_fig"]
    done = plotting.regenerate_all(tmp_path / "out", formats=("png",), progress=False)
    assert list(done) == ["zz_fig"] and done["zz_fig"][0].exists()
    (tmp_path / "pkg" / "zz_broken.py").write_text("import a_package_that_is_not_installed\ndef fig_two(): pass\n")
    with pytest.raises(ModuleNotFoundError, match="a_package_that_is_not_installed") as err:
        plotting.regenerate_all(tmp_path / "out", formats=("png",), progress=False)
    assert any("bayesnotes.zz_broken" in n for n in getattr(err.value, "__notes__", []))
    with pytest.raises(ModuleNotFoundError):
        plotting.regenerate_all(tmp_path / "out", chapters=["no_such_chapter"], progress=False)
    sys.modules.pop("bayesnotes.zz_fig", None); sys.modules.pop("bayesnotes.zz_broken", None)


def test_figure_modules_of_the_package_include_every_chapter_with_figures():
    "The real package: the default list covers the 11 main chapters that have figures and the sub-chapters (ais, pmcmc, ...)."
    from bayesnotes import plotting
    found = plotting.figure_modules()
    assert {"core", "targets", "ais", "pmcmc", "vqvae"} <= set(found) and "plotting" not in found and "utils" not in found


# ---------------------------------------------------------------- review 00a/00b (utils, targets): traps now closed
def test_check_spd_symmetry_is_relative_to_the_scale():
    "Review 00a item 10: the tolerance had a floor of 1e-12, so an asymmetric covariance of scale 1e-12 was accepted and read from its lower triangle."
    S = np.array([[1e-12, 9e-13], [0.0, 1e-12]])
    for scale in (1.0, 1e12, 1e-6):
        with pytest.raises(ValueError, match="^S must be symmetric"):
            check_spd("S", S * scale)
    good = np.array([[2.0, 0.9], [0.9, 1.0]])
    for scale in (1e-14, 1.0, 1e14):
        A = good * scale; A[0, 1] *= 1 + 1e-13                       # rounding-level asymmetry passes at any scale
        assert np.allclose(check_spd("S", A) @ check_spd("S", A).T, A, rtol=1e-9, atol=0)
    with pytest.raises(ValueError, match="^S must be a non-empty matrix"):
        check_spd("S", np.zeros((0, 0)))                              # old: numpy's "zero-size array to reduction"
    for d in (0, 1.5, True):
        with pytest.raises(ValueError, match="^d must be an integer >= 1"):
            check_spd("S", np.eye(2), d=d)                            # old: "S must have shape (0, 0)"


def test_warns_reissues_other_warnings_when_the_block_raises():
    "Review 00a item 8: a warning issued in a block that then raised was swallowed."
    import warnings
    from bayesnotes.utils import warns
    with warnings.catch_warnings(record=True) as outer:
        warnings.simplefilter("always")
        with pytest.raises(KeyError):
            with warns(RuntimeWarning):
                warnings.warn("keep me", UserWarning)
                raise KeyError("k")
    assert [str(w.message) for w in outer] == ["keep me"]
    with warnings.catch_warnings(record=True) as outer:
        warnings.simplefilter("always")
        with warns(RuntimeWarning):
            warnings.warn("expected", RuntimeWarning); warnings.warn("other", UserWarning)
    assert [str(w.message) for w in outer] == ["other"]


def test_target_refuses_points_of_another_shape_and_gaussian_target_reads_dim():
    "Review 00b items 2-4, 6, 7: wrong shapes gave silent numbers (a batch summed into one), and dim was ignored."
    from bayesnotes.targets import Target, correlated_gaussian, gaussian_target
    t = Target(lambda x: -0.5 * anp.sum(x**2), 3)
    for bad in (np.ones(5), np.ones((4, 3)), np.ones((1, 3)), np.ones((3, 1))):
        for method in (t.logdensity, t.value_and_grad, t.grad, t.hessian):
            with pytest.raises(ValueError, match=r"^x must have shape \(3,\)"):
                method(bad)
    v, g = t.value_and_grad(np.ones(3))
    assert v == -1.5 and g.shape == (3,)
    one = Target(lambda x: -0.5 * anp.sum(x**2), 1)                  # dim 1: a number is one point
    assert one.logdensity(2.0) == -2.0 and one.value_and_grad(2.0)[1].shape == (1,)
    cg = correlated_gaussian()
    for method in (cg.logdensity_batch, cg.value_and_grad_batch):
        with pytest.raises(ValueError, match=r"^X must have shape \(\.\.\., 2\)"):
            method(np.ones((4, 6)))
    assert cg.value_and_grad_batch(np.ones((2, 3, 2)))[1].shape == (2, 3, 2)
    gt = gaussian_target(sd=2.0, dim=3)                                # old: dim=1, dim silently ignored
    assert gt.dim == 3 and np.allclose(gt.cov, 4 * np.eye(3))
    assert np.isclose(gt.logdensity(np.ones(3)), stats.multivariate_normal(np.zeros(3), 4 * np.eye(3)).logpdf(np.ones(3)))
    assert gaussian_target(cov=2.0, dim=2).dim == 2 and np.allclose(gaussian_target(cov=2.0, dim=2).cov, 2 * np.eye(2))
    assert gaussian_target(mean=np.ones(4), sd=1.0).dim == 4           # a number sd takes the mean's dimension
    assert gaussian_target(sd=1.0).dim == 1 and gaussian_target(sd=[1.0, 2.0], dim=2).dim == 2


def test_checks_name_the_argument_on_odd_input():
    "Review 00a item 9: a ragged list, an int shape and None gave numpy's or Python's words, or a misleading one."
    with pytest.raises(ValueError, match="^x must be an array"):
        check_shape("x", [[1], [1, 2]], (2,))                         # old: numpy's "inhomogeneous shape"
    assert check_shape("x", np.zeros(3), 3).shape == (3,)             # old: TypeError, len() of an int
    with pytest.raises(ValueError, match=r"^x must have shape \(3,\)"):
        check_shape("x", np.zeros(2), 3)
    with pytest.raises(ValueError, match="^x must be a number or an array of numbers, got None"):
        check_finite("x", None)                                       # old: "x must be finite; it has 1 non-finite"


def test_renamed_reports_a_clash_under_the_old_name_and_checks_the_new_one():
    "Review 00a item 13: new by position plus old by keyword gave Python's 'multiple values' without the old name; a **kwargs or positional-only new name was accepted."
    from bayesnotes.utils import renamed
    @renamed(logp="target")
    def f(target, n=1): return target, n
    with pytest.warns(DeprecationWarning):
        assert f(logp=2) == (2, 1)
    with pytest.raises(TypeError, match="got 'target' and its old name 'logp'"):
        f(1, logp=2)
    for fn in (lambda a, **kw: a, lambda a, /, b=1: a):
        with pytest.raises(ValueError, match="^renamed: 'kw' must be a parameter|^renamed: 'a' must be a parameter"):
            renamed(x="kw" if "kw" in fn.__code__.co_varnames else "a")(fn)
