"""Tests for bayesnotes.vaemodels: the CVAE's exact reduction to a VAE, the Gumbel-max law and the concrete density
against quadrature and a logistic change of variables, M2's bounds against brute-force sums over the labels, gradients
against finite differences, the trained models' behaviour, and input validation."""
import numpy as np
import pytest
from scipy import integrate, special, stats
import autograd.numpy as anp
from autograd import grad
from autograd.misc import flatten

from bayesnotes.vae import digits_data
from bayesnotes.vaemodels import (CVAE, M2, concrete_logpdf, generation_accuracy, gumbel_softmax,
                                  semi_supervised_run, semi_supervised_split, trained_cvae)


@pytest.fixture(scope="module")
def data():
    return digits_data(0)


def _random_model(cls, rng, data, **kw):
    "An untrained model with initialised networks and non-zero biases (the checks below are exact identities)."
    m = cls(**kw)
    m._init(74, rng, np.r_[data.X_train.mean(0), np.full(10, 0.1)])
    m.params = {k: p + 0.3 * rng.standard_normal(p.shape) for k, p in m.params.items()}
    return m


@pytest.mark.parametrize("hidden", [(), (8,), (8, 5)])
def test_cvae_with_zero_label_is_the_vae(data, seed, hidden):
    rng = np.random.default_rng(seed(0))
    m = _random_model(CVAE, rng, data, latent_dim=3, hidden=hidden)
    v = m.unconditional()
    X, eps = data.X_test[:30], rng.standard_normal((4, 30, 3))
    a = np.subtract(*v._elbo_terms(v.params, X, eps))
    b = np.subtract(*m._elbo_terms(m.params, np.c_[X, np.zeros((30, 10))], eps))
    assert np.allclose(a, b, rtol=1e-12, atol=1e-12)      # the same sums up to the order of floating-point additions
    c = m._conditional_elbo(X, data.y_test[:30], eps)      # a label switched on changes the objective
    assert np.max(np.abs(a - c)) > 1e-3


def test_label_elbos_are_the_conditional_elbos(data, seed):
    "label_elbos (one label at a time, shared noise) matches elbo_per_image called with each constant label."
    m = _random_model(CVAE, np.random.default_rng(seed(1)), data, latent_dim=2, hidden=(8,))
    X = data.X_test[:20]
    LE = m.label_elbos(X, n_mc=3, rng=seed(2))
    for c in (0, 4, 9):
        assert np.allclose(LE[:, c], m.elbo_per_image(X, np.full(20, c), n_mc=3, rng=seed(2)))


def test_m2_bounds_equal_brute_force_sums(data, seed):
    """U(x) = sum_y q(y|x) (L(x, y) - log q(y|x)) and the labelled row L(x, y) + alpha log q(y|x), against a loop over
    the labels through the CVAE's single-label code path with the same noise."""
    rng = np.random.default_rng(seed(3))
    m = _random_model(M2, rng, data, latent_dim=3, hidden=(8,), alpha=7.)
    X, y, eps = data.X_test[:25], data.y_test[:25], rng.standard_normal((2, 25, 3))
    lq = np.log(m.predict_proba(X))
    L = np.stack([m._conditional_elbo(X, np.full(25, c), eps) for c in range(10)], axis=1) - np.log(10)
    U = m._elbo_terms(m.params, np.c_[X, np.zeros((25, 10))], eps)[0]
    assert np.allclose(U, np.sum(np.exp(lq) * (L - lq), axis=1), rtol=1e-10, atol=1e-10)
    lab = m._elbo_terms(m.params, m._join(X, y), eps)[0]
    assert np.allclose(lab, L[np.arange(25), y] + 7. * lq[np.arange(25), y], rtol=1e-10, atol=1e-10)
    # U is a bound below log sum_y exp L(x, y), the value it takes at q(y|x) = softmax_y L(x, y)
    assert np.all(U <= special.logsumexp(L, axis=1) + 1e-9)
    assert np.allclose(m.unlabelled_bound(X, 2, rng=seed(4)), m._elbo_terms(
        m.params, np.c_[X, np.zeros((25, 10))], np.random.default_rng(seed(4)).standard_normal((2, 25, 3)))[0])


def test_m2_gradient_matches_finite_differences(data, seed):
    "autograd's gradient of the M2 minibatch objective (labelled and unlabelled rows, fixed noise) vs central differences."
    rng = np.random.default_rng(seed(5))
    m = _random_model(M2, rng, data, latent_dim=2, hidden=(3,), activation="tanh", alpha=2.)
    m.n_pixels, m.data_dim = 64, 74
    rows = np.r_[m._join(data.X_test[:3], data.y_test[:3]), np.c_[data.X_test[3:6], np.zeros((3, 10))]]
    eps = rng.standard_normal((1, 6, 2))
    flat, unflatten = flatten(m.params)
    def f(theta): return anp.mean(m._elbo_terms(unflatten(theta), rows, eps)[0])
    g = grad(f)(flat)
    idx = rng.choice(flat.size, 60, replace=False)
    h = 1e-5
    fd = np.array([(f(flat + h * e) - f(flat - h * e)) / (2 * h) for e in np.eye(flat.size)[idx]])
    # central differences: O(h^2) truncation and O(1e-16 / h) rounding, far below the tolerance
    assert np.allclose(g[idx], fd, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("tau", [0.02, 0.5, 5.])
def test_gumbel_max_law_at_every_temperature(seed, tau):
    "argmax of a Gumbel-softmax draw is Cat(softmax(logits)) exactly: chi-square at 1e-4 per test, 3 tests: < 3e-4."
    logits = np.array([0.3, -1.2, 1.0, 0.0, -0.5])
    s = gumbel_softmax(logits, tau, 30_000, rng=seed(6))
    assert s.shape == (30_000, 5) and np.allclose(s.sum(1), 1) and np.all(s >= 0)
    counts = np.bincount(s.argmax(1), minlength=5)
    assert stats.chisquare(counts, 30_000 * special.softmax(logits)).pvalue > 1e-4


@pytest.mark.parametrize("tau", [0.3, 1., 2.5])
def test_binary_concrete_density_and_samples(seed, tau):
    """K = 2: the density (Maddison et al.) integrates to 1, equals the logistic change of variables, and the draws'
    first coordinate passes a KS test against that law (1e-4 per test, 3 tests: false alarm < 3e-4)."""
    lg = np.array([0.7, -0.4])
    f = lambda u: np.exp(concrete_logpdf(np.array([u, 1 - u]), lg, tau))
    assert abs(integrate.quad(f, 0, 1, limit=200)[0] - 1) < 1e-6
    u = np.linspace(0.001, 0.999, 25)
    ref = stats.logistic.logpdf(tau * special.logit(u) - (lg[0] - lg[1])) + np.log(tau / (u * (1 - u)))
    assert np.allclose(concrete_logpdf(np.c_[u, 1 - u], lg, tau), ref)
    y1 = gumbel_softmax(lg, tau, 5000, rng=seed(7))[:, 0]
    cdf = lambda v: stats.logistic.cdf(tau * special.logit(v) - (lg[0] - lg[1]))
    assert stats.kstest(y1, cdf).pvalue > 1e-4


def test_concrete_density_integrates_to_one_for_three_classes():
    """K = 3, tau = 1.5: the density on the triangle {y1, y2 > 0, y1 + y2 < 1} integrates to 1. Product Gauss-Legendre
    rule after y = (u, (1 - u) v, (1 - u)(1 - v)), Jacobian 1 - u; the integrand vanishes like y_k^2 at the edges, so
    200 x 200 nodes are exact to about 2e-7 (400 x 400 nodes: 2e-8)."""
    lg = np.array([0.5, -0.3, 0.1])
    for n in (200, 400):
        x, w = np.polynomial.legendre.leggauss(n)
        x, w = (x + 1) / 2, w / 2
        U, V = np.meshgrid(x, x, indexing="ij")
        Y = np.stack([U, (1 - U) * V, (1 - U) * (1 - V)], axis=-1)
        assert abs(np.sum(np.outer(w, w) * (1 - U) * np.exp(concrete_logpdf(Y, lg, 1.5))) - 1) < 1e-5


def test_concrete_tends_to_categorical_as_tau_falls(seed):
    """tau = 0.001: max_k y_k < 0.999 needs the two largest perturbed logits within tau log 999 = 0.007 of each other,
    which happens to about 0.35 % of draws (3.5 % measured at tau = 0.01; the share is linear in tau), so > 99 % of the
    draws are one-hot to 1e-3 (16 binomial sd of margin). Their mean is pi within 5 standard errors (two-sided,
    3 comparisons: false alarm < 2e-6); the relaxation's bias is O(tau^2), negligible against an s.e. of 0.003."""
    lg = np.array([1., 0., -1.])
    pi = special.softmax(lg)
    s = gumbel_softmax(lg, 0.001, 20_000, rng=seed(8))
    assert np.mean(s.max(1) > 0.999) > 0.99
    assert np.all(np.abs(s.mean(0) - pi) < 5 * np.sqrt(pi * (1 - pi) / 20_000))


def test_concrete_log_space_at_small_temperature(seed):
    """tau = 0.01, where y underflows to exact zeros and the probability form raises (the old code had no other form;
    this test fails on it). Draws in log space (`log_y=True`) are the logs of the probability-space draws with the same
    noise; (4) evaluated from log y is finite at every draw, agrees with the probability form wherever y is a normal
    float, and for K = 2 equals the logistic change of variables written in log y, also at draws whose y underflows.
    Identities to rounding; the two `np.any` checks fail with probability < exp(-39): y_k = 0 once a perturbed logit
    is 745 tau = 7.45 below the largest, which for the pair (1, 4) alone has probability P(logistic > 7.45 +
    log(0.1 / 0.4)) = 0.0023 per draw, and for K = 2 below P(|logistic + 1.1| > 7.45) = 0.0019."""
    lg = np.log([0.1, 0.2, 0.3, 0.4])
    ly = gumbel_softmax(lg, 0.01, 20_000, rng=seed(21), log_y=True)
    y = gumbel_softmax(lg, 0.01, 20_000, rng=seed(21))
    assert np.any(y == 0)
    with pytest.raises(ValueError, match="simplex"):
        concrete_logpdf(y, lg, 0.01)
    ok = y.min(1) > 1e-300                                   # rows of normal floats: both forms apply
    assert np.allclose(np.exp(ly[ok]), y[ok], rtol=1e-9, atol=0)
    lp = concrete_logpdf(ly, lg, 0.01, log_y=True)
    assert np.all(np.isfinite(lp))
    assert np.allclose(concrete_logpdf(y[ok], lg, 0.01), lp[ok], rtol=1e-10, atol=1e-8)
    l2 = np.array([0.7, -0.4])
    ly2 = gumbel_softmax(l2, 0.01, 20_000, rng=seed(22), log_y=True)
    ref = stats.logistic.logpdf(0.01 * (ly2[:, 0] - ly2[:, 1]) - (l2[0] - l2[1])) + np.log(0.01) - ly2.sum(1)
    assert np.any(ly2.min(1) < -745.2)                       # draws whose y underflows are among those checked
    assert np.allclose(concrete_logpdf(ly2, l2, 0.01, log_y=True), ref, rtol=1e-9, atol=0)


def test_trained_cvae_uses_the_label(data, seed):
    """Over 12 training seeds: mean ELBO gap true vs wrong labels 22.6-24.4 nats (s.e. 0.4 over images), >= 99.4 % of
    images positive; generated digits recognised as requested 99.6-100 %. Bounds 10 nats, 95 %, 90 %."""
    m = trained_cvae(rng=seed(9))
    LE = m.label_elbos(data.X_test, n_mc=5, rng=seed(10))
    true = LE[np.arange(len(LE)), data.y_test]
    gap = true - (LE.sum(1) - true) / 9
    assert gap.mean() > 10 and np.mean(gap > 0) > 0.95
    assert generation_accuracy(m, 30, rng=seed(11)) > 0.9


def test_cvae_records_the_held_out_conditional_elbo(data, seed):
    """`fit(X_val=, y_val=)` records the conditional ELBO of the held-out images given their labels each epoch, with the
    evaluation noise `VAE.fit` fixes per epoch (seed 10000 + epoch - 1), so the last entry is that of the final weights."""
    Xv, yv = data.X_test[:60], data.y_test[:60]
    c = CVAE(2, (16,)).fit(data.X_train[:200], data.y_train[:200], epochs=2, batch_size=100, rng=seed(20),
                           X_val=Xv, y_val=yv)
    assert len(c.history["test_elbo"]) == 2
    assert np.isclose(c.history["test_elbo"][-1], c.elbo(Xv, yv, rng=10_001), rtol=1e-12)
    with pytest.raises(ValueError, match="X_val and y_val"):
        c.fit(data.X_train[:200], data.y_train[:200], epochs=1, X_val=Xv)


def test_m2_with_ten_labels_per_class(seed):
    """Over 24 runs M2's test accuracy was 0.852-0.914 (mean 0.878, sd 0.017) and its gain over logistic regression on
    the same 100 labels 0.000 to 0.072 (mean 0.038, sd 0.020); its generated digits were recognised as requested
    98.2-99.8 % of the time. Asserted: accuracy above 0.8 (4.5 sd under the mean), at most 0.04 below the baseline
    (3.9 sd under the mean gain), generation above 90 %."""
    run = semi_supervised_run(10, rng=seed(12))
    assert len(run.labelled) == 100
    assert run.accuracy > 0.8 and run.accuracy > run.baseline_accuracy - 0.04
    assert generation_accuracy(run.model, 30, rng=seed(18)) > 0.9


def test_bad_inputs(data, seed):
    m = _random_model(M2, np.random.default_rng(seed(13)), data, latent_dim=2, hidden=(4,))
    X = data.X_test[:5]
    for kwargs, name in ((dict(y=np.full(5, 10)), "y"), (dict(y=np.zeros(4, int)), "y"),
                         (dict(y=np.array([0, 1, 2, 3, 0.5])), "y"), (dict(y=np.zeros(5, int), n_mc=0), "n_mc")):
        with pytest.raises(ValueError, match=name):
            m.elbo(X, **kwargs)
    with pytest.raises(ValueError, match="X"):
        m.elbo(np.full((5, 64), np.nan), np.zeros(5, int))
    with pytest.raises(ValueError, match="Z"):
        m.decode(np.zeros((5, 3)), np.zeros(5, int))
    with pytest.raises(ValueError, match="X_unlabelled"):
        M2().fit(X, np.zeros(5, int), X[:, :10])
    with pytest.raises(ValueError, match="alpha"):
        M2(alpha=-1.)
    with pytest.raises(ValueError, match="n_classes"):
        CVAE(n_classes=1)
    with pytest.raises(ValueError, match="not trained"):
        CVAE().sample(np.arange(3))
    with pytest.raises(ValueError, match="n_per_class"):
        semi_supervised_split(data.y_train, 0)
    with pytest.raises(ValueError, match="tau"):
        gumbel_softmax(np.zeros(3), tau=-1.)
    with pytest.raises(ValueError, match="logits"):
        gumbel_softmax(np.array([np.inf, 0.]))
    with pytest.raises(ValueError, match="simplex"):
        concrete_logpdf(np.array([0., 1.]), np.zeros(2))
    with pytest.raises(ValueError, match="y"):
        concrete_logpdf(np.array([0.2, 0.3, 0.5]), np.zeros(2))
    with pytest.raises(ValueError, match="log y"):
        concrete_logpdf(np.log([0.5, 0.6]), np.zeros(2), log_y=True)


def test_cvae_log_weights_are_unbiased_for_the_elbo(data, seed):
    """E_q[log w] = ELBO: the mean of K = 4000 log weights per image against 4000 independent single-draw ELBOs (each
    with its closed-form KL); z = difference / combined s.e., 5 s.e. two-sided over 10 images: false alarm < 6e-6."""
    m = trained_cvae(rng=seed(14))
    X, y, K = data.X_test[:10], data.y_test[:10], 4000
    lw = m.log_weights(X, y, K, rng=seed(15))
    rec, kl = m._conditional_terms(X, y, np.random.default_rng(seed(16)).standard_normal((1, K, 10, m.latent_dim)))
    e = rec - kl                                          # (K, 10): one draw of z per row
    z = (lw.mean(0) - e.mean(0)) / np.sqrt(lw.var(0, ddof=1) / K + e.var(0, ddof=1) / K)
    assert np.all(np.abs(z) < 5), z
    # the IWAE bound is at least the ELBO on average (deterministically so for the same draws, by Jensen)
    assert np.all(special.logsumexp(lw, axis=0) - np.log(K) >= lw.mean(0))
    assert np.isclose(m.iwae(X, y, 50, rng=seed(17)), m.iwae_per_image(X, y, 50, rng=seed(17)).mean())
