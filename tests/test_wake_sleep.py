"""Tests for bayesnotes.wake_sleep: the mixture's exact quantities against hand sums, the expected self-normalised weights
against brute-force enumeration of all K-tuples, the wake estimators against their exact expectations (Monte Carlo, bounds
from the estimators' own spread), the RWS model update as the exact IWAE gradient, the sleep gradient against the
quadrature gradient, the sleep fit against the exact posterior (Wald test from the Fisher information), the TVO sandwich
and its refinements, the AIS link, the digits RWS surrogate against a hand computation of the wake updates, and input
validation. Every seed comes from the `seed` fixture; every statistical bound states its false-alarm probability."""
import itertools

import numpy as np
import pytest
from scipy import special, stats

import autograd.numpy as anp
from autograd import grad
from autograd.misc import flatten

from bayesnotes.vae import digits_data, log_bernoulli, log_normal_diag
from bayesnotes.wake_sleep import (
    TRUE_THETA, RWSVAE, compositions, encoder_fisher, encoder_probs, exact_gradients, example_problem,
    expected_rws_gradients, expected_snis_weights, expected_tvo_integrand_snis, iwae_exact, kl_divergences, log_joint,
    log_marginal, log_partition, posterior_encoder, posterior_probs, rws_gradients, sample_log_weights, sample_model,
    sleep_fit, sleep_gradient, sleep_objective, thermodynamic_integrand_1d, tvo_ais_link, tvo_bounds, tvo_integrand,
    tvo_integrand_snis, wake_sleep_field_jacobians, wake_sleep_fit)


@pytest.fixture(scope="module")
def ex():
    return example_problem()


def _random_setting(rng, C=3, n=40, F=2):
    theta = np.r_[rng.standard_normal(C), 2 * rng.standard_normal(C)]
    phi = rng.standard_normal((C, F))
    x = rng.normal(0, 2, n)
    return theta, phi, x


def test_mixture_quantities_match_hand_sums(seed):
    rng = np.random.default_rng(seed(0))
    theta, phi, x = _random_setting(rng)
    pi = np.exp(theta[:3]) / np.exp(theta[:3]).sum()
    joint = pi * stats.norm.pdf(x[:, None], theta[3:], 1.0)
    assert np.allclose(np.exp(log_joint(theta, x)), joint, rtol=1e-12)
    assert np.allclose(log_marginal(theta, x), np.log(joint.sum(1)), rtol=1e-12)
    assert np.allclose(posterior_probs(theta, x), joint / joint.sum(1, keepdims=True), atol=1e-14)
    # the posterior lies in the encoder family
    assert np.allclose(encoder_probs(posterior_encoder(theta), x), posterior_probs(theta, x), atol=1e-13)
    incl, excl = kl_divergences(theta, posterior_encoder(theta), x)
    assert abs(incl) < 1e-12 and abs(excl) < 1e-12
    incl, excl = kl_divergences(theta, phi, x)
    assert incl > 0 and excl > 0


def test_expected_snis_weights_match_enumeration_of_tuples(seed):
    "rho(K) from the multinomial counts equals the average over all C^K ordered K-tuples, weighted by their probability."
    rng = np.random.default_rng(seed(1))
    logq = np.log(rng.dirichlet(np.ones(3), size=4))
    logw = rng.normal(0, 1.5, (4, 3))
    for K in (1, 2, 3, 5):
        rho = expected_snis_weights(logq, logw, K)
        brute = np.zeros_like(rho)
        for tup in itertools.product(range(3), repeat=K):
            t = np.array(tup)
            p = np.exp(logq[:, t].sum(1))                           # (n,)
            wb = np.exp(logw[:, t] - special.logsumexp(logw[:, t], axis=1, keepdims=True))
            for k, c in enumerate(t):
                brute[:, c] += p * wb[:, k]
        assert np.allclose(rho, brute, atol=1e-13)
    assert np.allclose(expected_snis_weights(logq, logw, 1), np.exp(logq), atol=1e-14)
    # K -> infinity: rho(K) = post + a / K + O(1/K^2), with the delta-method coefficient of the ratio estimator
    # a_c = post_c E_q[w^2] / Z^2 - q_c w_c^2 / Z^2 (Z = E_q w). At K = 400 the remainder K (rho - post) - a was at most
    # 0.113 of max|a| over 300 random problems (median 0.005): a deterministic check with the bound 0.25
    q, w = np.exp(logq), np.exp(logw)
    Z = (q * w).sum(1, keepdims=True)
    post = q * w / Z
    a = post * (q * w ** 2).sum(1, keepdims=True) / Z ** 2 - q * w ** 2 / Z ** 2
    K = 400
    assert np.abs(K * (expected_snis_weights(logq, logw, K) - post) - a).max() < 0.25 * np.abs(a).max()


def test_compositions_count_and_sum():
    for K, C in ((0, 3), (1, 3), (5, 2), (6, 4)):
        c = compositions(K, C)
        assert len(c) == special.comb(K + C - 1, C - 1, exact=True) and np.all(c.sum(1) == K) and c.min() >= 0
        assert len({tuple(r) for r in c}) == len(c)


def test_rws_theta_update_is_the_exact_iwae_gradient(ex):
    "E[wake-theta] = grad_theta L_K exactly, since the law of the draws does not depend on theta; L_K increases with K."
    vals = []
    for K in (1, 2, 5, 12):
        v, g_theta, _ = iwae_exact(ex.theta, ex.phi, ex.x, K)
        assert np.allclose(expected_rws_gradients(ex.theta, ex.phi, ex.x, K)[0], g_theta, atol=1e-13)
        vals.append(v)
    lp = np.mean(log_marginal(ex.theta, ex.x))
    assert np.all(np.diff(vals) > 0) and vals[-1] < lp
    # L_1 is the ELBO: log p - KL(q || p)
    assert np.isclose(vals[0], lp - kl_divergences(ex.theta, ex.phi, ex.x)[1], atol=1e-12)


def test_iwae_phi_gradient_against_finite_differences(ex):
    "The exact IWAE encoder gradient (autograd through the multinomial sum) against central differences (O(h^2) error)."
    _, _, g = iwae_exact(ex.theta, ex.phi, ex.x, 4)
    h = 1e-6
    for (i, j) in ((0, 0), (1, 1), (2, 0)):
        e = np.zeros_like(ex.phi); e[i, j] = h
        fd = (iwae_exact(ex.theta, ex.phi + e, ex.x, 4)[0] - iwae_exact(ex.theta, ex.phi - e, ex.x, 4)[0]) / (2 * h)
        assert abs(fd - g[i, j]) < 1e-7


def test_wake_estimators_unbiased_for_their_exact_expectation(seed, ex):
    """300 independent estimates at K = 3: each of the 12 coordinates (6 theta, 6 phi) within 4 standard errors of its
    exact expectation. Each estimate averages 200 observations, so the mean of 300 is close to normal; with the standard
    error estimated (Student t, 299 df: 8e-5 per coordinate, two-sided) the false-alarm probability is about 12 * 8e-5 ~ 1e-3."""
    G = np.array([np.r_[g.theta, g.phi.ravel()] for g in
                  (rws_gradients(ex.theta, ex.phi, ex.x, 3, rng=seed(1000 + i)) for i in range(300))])
    E = np.concatenate([np.ravel(a) for a in expected_rws_gradients(ex.theta, ex.phi, ex.x, 3)])
    z = (G.mean(0) - E) / (G.std(0, ddof=1) / np.sqrt(len(G)))
    assert np.max(np.abs(z)) < 4, z


def test_rws_bias_is_real_and_shrinks(ex):
    "Exact: the K = 1 wake-theta update is the ELBO gradient, biased for grad log p(x); the bias falls like 1/K."
    gt, gp = exact_gradients(ex.theta, ex.phi, ex.x)
    b = [np.linalg.norm(expected_rws_gradients(ex.theta, ex.phi, ex.x, K)[0] - gt) for K in (1, 16, 32, 64)]
    assert b[0] > 0.3 and b[1] > b[2] > b[3]
    assert abs(b[2] / b[3] - 2) < 0.1                               # 1/K: doubling K halves the bias (exact numbers: 2.04)
    # the K = 1 update is the ELBO gradient
    from bayesnotes.wake_sleep import elbo_mixture
    assert np.allclose(expected_rws_gradients(ex.theta, ex.phi, ex.x, 1)[0],
                       grad(elbo_mixture, 0)(ex.theta, ex.phi, ex.x), atol=1e-13)
    # wake-phi: zero mean at K = 1, tends to minus the inclusive-KL gradient
    assert np.allclose(expected_rws_gradients(ex.theta, ex.phi, ex.x, 1)[1], 0, atol=1e-14)
    p32 = expected_rws_gradients(ex.theta, ex.phi, ex.x, 32)[1]
    p16 = expected_rws_gradients(ex.theta, ex.phi, ex.x, 16)[1]
    assert np.linalg.norm(p32 - gp) < np.linalg.norm(p16 - gp) < 0.01


def test_wake_phi_target_is_the_inclusive_kl(seed):
    "exact_gradients' phi part is minus the gradient of the mean inclusive KL (central differences, O(h^2))."
    rng = np.random.default_rng(seed(2))
    theta, phi, x = _random_setting(rng)
    _, gp = exact_gradients(theta, phi, x)
    h = 1e-6
    for (i, j) in ((0, 1), (2, 0)):
        e = np.zeros_like(phi); e[i, j] = h
        fd = (kl_divergences(theta, phi + e, x)[0] - kl_divergences(theta, phi - e, x)[0]) / (2 * h)
        assert abs(-fd - gp[i, j]) < 1e-7


def test_sleep_gradient_unbiased_for_the_quadrature_gradient(seed, ex):
    """Mean of 300 sleep gradients (50 dreams each) against grad_phi of the Gauss-Hermite sleep objective: 6 coordinates
    within 4 standard errors (Student t, 299 df; false-alarm probability about 6 * 8e-5 ~ 5e-4)."""
    G = np.array([sleep_gradient(ex.theta, ex.phi, 50, rng=seed(2000 + i)).ravel() for i in range(300)])
    E = grad(sleep_objective, 1)(ex.theta, ex.phi).ravel()
    z = (G.mean(0) - E) / (G.std(0, ddof=1) / np.sqrt(len(G)))
    assert np.max(np.abs(z)) < 4, z
    # the quadrature has converged (60 against 150 nodes)
    assert np.isclose(sleep_objective(ex.theta, ex.phi, n_nodes=60), sleep_objective(ex.theta, ex.phi, n_nodes=150),
                      rtol=1e-12, atol=1e-12)


def test_sleep_fit_is_consistent_for_the_posterior(seed):
    """The sleep phase to convergence on S dreams is a well-specified softmax regression, so the Wald statistic
    S d^T I d (I from `encoder_fisher`) is asymptotically chi^2 with 4 degrees of freedom: p-value above 1e-3
    (false-alarm probability 1e-3). The Fisher information is checked against the empirical one of the dreams."""
    S = 20_000
    phi = sleep_fit(TRUE_THETA, S, rng=seed(3))
    star = posterior_encoder(TRUE_THETA); star = star - star[0]
    d = (phi - star)[1:].ravel()
    I = encoder_fisher(TRUE_THETA)
    assert stats.chi2.sf(S * d @ I @ d, 4) > 1e-3
    assert np.allclose(I, I.T) and np.all(np.linalg.eigvalsh(I) > 0)


def test_wake_sleep_is_not_a_gradient_field(ex):
    "Exact: the mixed Jacobians of the wake (K = 1) and sleep fields differ; autograd Jacobians against finite differences."
    A, B = wake_sleep_field_jacobians(ex.theta, ex.phi, ex.x)
    assert np.abs(A - B).max() > 0.1
    from bayesnotes.wake_sleep import elbo_mixture
    h = 1e-6
    e = np.zeros_like(ex.phi); e[1, 1] = h
    g = lambda p: grad(elbo_mixture, 0)(ex.theta, p, ex.x)
    assert np.allclose((g(ex.phi + e) - g(ex.phi - e)) / (2 * h), A[:, 3], atol=1e-7)   # phi[1, 1] is column 3


def test_tvo_sandwich_and_refinement(seed):
    rng = np.random.default_rng(seed(4))
    theta, phi, x = _random_setting(rng)
    lp = np.mean(log_marginal(theta, x))
    incl, excl = kl_divergences(theta, phi, x)
    one = tvo_bounds(theta, phi, x, [0., 1.])
    assert np.isclose(one.lower, lp - excl, atol=1e-12) and np.isclose(one.upper, lp + incl, atol=1e-12)
    assert np.isclose(one.log_evidence, lp)
    # nested partitions: lower sums rise, upper sums fall, all bracket log p(x)
    for j in range(6):
        b = np.sort(np.r_[0., 1., rng.uniform(size=2 ** j)]) if j else np.array([0., 1.])
        lo, up, _ = tvo_bounds(theta, phi, x, b)
        assert lo <= lp <= up
        if j:   # refine the previous partition by adding points
            b2 = np.unique(np.r_[b, rng.uniform(size=3)])
            lo2, up2, _ = tvo_bounds(theta, phi, x, b2)
            assert lo2 >= lo - 1e-14 and up2 <= up + 1e-14
    # the integrand integrates to log p(x) (Gauss-Legendre) and is the derivative of log Z_beta
    from scipy import integrate      # adaptive quadrature with its own error estimate: the integrand can turn sharply
    val, err = integrate.quad(lambda b: tvo_integrand(theta, phi, x, [b])[0], 0., 1., epsabs=1e-12, epsrel=1e-12, limit=200)
    assert err < 1e-10 and abs(val - lp) < 1e-9
    assert np.allclose(log_partition(theta, phi, x, [0., 1.]), [0., lp], atol=1e-12)


def test_tvo_snis_estimate_against_its_exact_expectation(seed, ex):
    """400 estimates with K = 6 at 3 betas within 4 standard errors of the exact expectation (Student t, 399 df: false alarm ~ 3 * 7.6e-5 ~ 2.3e-4); the
    estimate is exactly unbiased at beta = 0, and the exact expectation matches brute-force tuples for K = 2."""
    b = np.array([0., 0.4, 1.])
    est = np.array([tvo_integrand_snis(sample_log_weights(ex.theta, ex.phi, ex.x, 6, seed(3000 + i)), b) for i in range(400)])
    E = expected_tvo_integrand_snis(ex.theta, ex.phi, ex.x, b, 6)
    z = (est.mean(0) - E) / (est.std(0, ddof=1) / np.sqrt(len(est)))
    assert np.max(np.abs(z)) < 4, z
    assert np.isclose(E[0], tvo_integrand(ex.theta, ex.phi, ex.x, [0.])[0], atol=1e-12)
    # brute force for K = 2 on 5 observations
    x5 = ex.x[:5]
    lq = np.log(encoder_probs(ex.phi, x5)); lw = log_joint(ex.theta, x5) - lq
    brute = 0.
    for a, c in itertools.product(range(3), repeat=2):
        p = np.exp(lq[:, a] + lq[:, c])
        l = np.stack([lw[:, a], lw[:, c]], 1)
        wt = np.exp(0.4 * l - special.logsumexp(0.4 * l, axis=1, keepdims=True))
        brute = brute + p * np.sum(wt * l, axis=1)
    assert np.isclose(expected_tvo_integrand_snis(ex.theta, ex.phi, x5, [0.4], 2)[0], brute.mean(), atol=1e-13)


def test_tvo_ais_link(seed):
    """The grid integrand reproduces the AIS problem's exact log Z; AIS's log mean weight is within 4 delta-method
    standard errors of log Z (normal approximation, false alarm ~ 6e-5) and its mean log weight is below log Z by more
    than 4 standard errors (the gap, the left sum's, is 0.3-0.4 nats against a standard error of about 0.03)."""
    from bayesnotes.ais import mixture_evidence_problem
    p = mixture_evidence_problem(dim=1)
    _, lz = thermodynamic_integrand_1d(p.log_prior, p.log_lik, np.array([0., 1.]), np.linspace(-25, 25, 20_001))
    assert abs(lz[0]) < 1e-10 and abs(lz[1] - p.log_evidence) < 1e-10
    r = tvo_ais_link(n_temps=10, power=4., N=2000, n_mcmc=10, rng=seed(5))
    assert r.lower < r.log_evidence < r.upper
    assert abs(r.ais_log_evidence - r.log_evidence) < 4 * r.ais_log_evidence_se
    assert r.mean_log_weight + 4 * r.mean_log_weight_se < r.log_evidence


def test_training_with_exact_gradients_reaches_a_stationary_point(ex):
    "The exact method is deterministic Adam on log p(x): its final gradient is small and log p(x) never ends below its start."
    f = wake_sleep_fit(ex.x, "exact", n_steps=400, theta0=np.r_[0., 0, 0, -1, 0, 1], rng=0)
    gt, gp = exact_gradients(f.theta, f.phi, ex.x)
    assert np.abs(gt).max() < 1e-3 and f.history["log_lik"][-1] > f.history["log_lik"][0]
    assert f.history["kl_inclusive"][-1] < 1e-4                        # the full encoder reaches the posterior


def test_rws_vae_surrogate_gives_the_wake_updates(seed):
    """RWSVAE's training terms: the value is the K-sample IWAE estimate and the gradient is the wake-theta update for the
    decoder and the wake-phi update for the encoder, against a hand computation with the same draws."""
    data = digits_data(0)
    X = data.X_train[:20]
    m = RWSVAE(2, (8,), K=4)
    m._init(64, np.random.default_rng(seed(6)), data.X_train.mean(0))
    flat, unflat = flatten(m.params)
    m._rng = np.random.default_rng(seed(7))
    val = m._train_terms(m.params, X, None)[0]
    m._rng = np.random.default_rng(seed(7))
    g = grad(lambda f: anp.sum(m._train_terms(unflat(f), X, None)[0]))(flat)
    # by hand with the same draws
    e = np.random.default_rng(seed(7)).standard_normal((4, 20, 2))
    mu, ls = m._encode(m.params, X)
    z = mu + np.exp(ls) * e
    lq = log_normal_diag(z, mu, ls); lj = log_bernoulli(X, m._logits(m.params, z)) + log_normal_diag(z, 0., 0.)
    assert np.allclose(val, special.logsumexp(lj - lq, axis=0) - np.log(4), atol=1e-12)
    wbar = np.exp((lj - lq) - special.logsumexp(lj - lq, axis=0))
    def by_hand(f):
        p = unflat(f)
        mu_, ls_ = m._encode(p, X)
        return anp.sum(wbar * (log_bernoulli(X, m._logits(p, z)) + log_normal_diag(z, mu_, ls_)))
    assert np.allclose(g, grad(by_hand)(flat), atol=1e-10)


def test_bad_inputs_name_the_argument(ex):
    cases = [(lambda: log_marginal(np.zeros(3), ex.x), "theta"),
             (lambda: log_marginal(TRUE_THETA, np.ones((2, 2))), "x"),
             (lambda: rws_gradients(TRUE_THETA, np.zeros((2, 2)), ex.x), "phi"),
             (lambda: rws_gradients(TRUE_THETA, ex.phi, ex.x, K=0), "K"),
             (lambda: rws_gradients(TRUE_THETA, ex.phi, ex.x, sigma=-1.), "sigma"),
             (lambda: tvo_bounds(TRUE_THETA, ex.phi, ex.x, [0., 0.5, 0.4, 1.]), "betas"),
             (lambda: tvo_integrand(TRUE_THETA, ex.phi, ex.x, [1.5]), "betas"),
             (lambda: tvo_integrand_snis(np.zeros(4), [0.5]), "log_w"),
             (lambda: expected_snis_weights(np.zeros((2, 3)), np.zeros((2, 2)), 3), "logq"),
             (lambda: wake_sleep_fit(ex.x, "elbo"), "method"),
             (lambda: sample_model(TRUE_THETA, 0), "n"),
             (lambda: expected_snis_weights(np.zeros((2, 3)), np.zeros((2, 3)), 0), "K"),    # review 08f item 6
             (lambda: iwae_exact(TRUE_THETA, ex.phi, ex.x, 0), "K"),
             (lambda: sleep_gradient(TRUE_THETA, ex.phi, n_dreams=0), "n_dreams"),
             (lambda: compositions(-1, 3), "K"),
             (lambda: thermodynamic_integrand_1d(np.sin, np.sin, [0.], np.array([0., 1., 3.])), "grid"),
             (lambda: RWSVAE(objective="elbo"), "objective")]
    for f, name in cases:
        with pytest.raises(ValueError, match=name):
            f()


def _mixed_partials_fd(F, theta, phi, h=1e-4):
    "d^2 F / d theta_i d phi_j (2C, phi.size) by central differences of F itself (no autograd): error O(h^2)."
    out = np.zeros((theta.size, phi.size))
    for i in range(theta.size):
        for j in range(phi.size):
            ei = np.zeros_like(theta); ei[i] = h
            ej = np.zeros(phi.size); ej[j] = h; ej = ej.reshape(phi.shape)
            out[i, j] = (F(theta + ei, phi + ej) - F(theta + ei, phi - ej) - F(theta - ei, phi + ej)
                         + F(theta - ei, phi - ej)) / (4 * h * h)
    return out


def test_field_jacobians_against_mixed_finite_differences(seed):
    """Review 08f item 4: both mixed Jacobians, wake (d grad_theta ELBO / d phi) and sleep (d grad_phi sleep objective /
    d theta, transposed), against central differences of the two objectives themselves. Deterministic: the O(h^2)
    truncation (h = 1e-4) and the rounding (~1e-16 / h^2 = 1e-8 relative) stay below the 1e-5 tolerance."""
    from bayesnotes.wake_sleep import elbo_mixture
    rng = np.random.default_rng(seed(21))
    theta, phi, x = _random_setting(rng, n=15)
    A, B = wake_sleep_field_jacobians(theta, phi, x)
    fd_wake = _mixed_partials_fd(lambda t, p: elbo_mixture(t, p, x), theta, phi)
    fd_sleep = _mixed_partials_fd(lambda t, p: sleep_objective(t, p), theta, phi)
    assert A.shape == fd_wake.shape and B.shape == fd_sleep.shape
    assert np.allclose(A, fd_wake, rtol=1e-5, atol=1e-5 * np.abs(fd_wake).max())
    assert np.allclose(B, fd_sleep, rtol=1e-5, atol=1e-5 * np.abs(fd_sleep).max())


def test_rws_gradients_evidence_and_ess_fields(seed):
    """Review 08f item 4: `log_evidence` is the mean over observations of log (1/K) sum_k w_k and `ess` is
    1 / sum_k wbar_k^2 per observation, recomputed from the same draws (`sample_log_weights` with the same seed draws
    the same z) with core's log_mean_exp and ess; exact up to rounding. Plus the bounds 1 <= ess <= K."""
    from bayesnotes.core import ess, log_mean_exp
    rng = np.random.default_rng(seed(22))
    theta, phi, x = _random_setting(rng, n=12)
    K, s = 7, seed(23)
    g = rws_gradients(theta, phi, x, K=K, rng=s)
    lw = sample_log_weights(theta, phi, x, K, rng=s)                      # (K, n), the same draws
    assert np.isclose(g.log_evidence, np.mean([log_mean_exp(lw[:, i])[0] for i in range(x.size)]), rtol=0, atol=1e-12)
    assert np.allclose(g.ess, [ess(lw[:, i]) for i in range(x.size)], rtol=1e-12)
    assert g.ess.shape == (x.size,) and np.all(g.ess >= 1 - 1e-12) and np.all(g.ess <= K + 1e-12)


@pytest.mark.parametrize("method", ["exact", "rws", "wake-sleep"])
def test_wake_sleep_fit_branches_take_their_own_updates(method, seed):
    """Review 08f item 4: two steps of `wake_sleep_fit` equal two Adam steps taken by hand with the gradients the
    method names (exact gradients; RWS wake-theta and wake-phi; RWS wake-theta and the sleep gradient), drawing from
    one generator in the same order. Deterministic given the seed: a branch that used another update would differ."""
    from bayesnotes.core import Adam
    rng = np.random.default_rng(seed(24))
    theta0, phi0, x = _random_setting(rng, n=20)
    K, n_dreams, lr, s = 4, 30, 0.05, seed(25)
    fit = wake_sleep_fit(x, method, K=K, n_steps=2, lr=lr, n_dreams=n_dreams, theta0=theta0, phi0=phi0, rng=s)
    g_rng, theta, phi = np.random.default_rng(s), theta0.copy(), phi0.copy()
    opt_t, opt_p = Adam(lr=lr), Adam(lr=lr)
    for _ in range(2):
        if method == "exact":
            g_t, g_p = exact_gradients(theta, phi, x)
        else:
            g = rws_gradients(theta, phi, x, K, g_rng)
            g_t = g.theta
            g_p = g.phi if method == "rws" else sleep_gradient(theta, phi, n_dreams, g_rng)
        theta = opt_t.step(theta, g_t)
        phi = opt_p.step(phi.ravel(), np.ravel(g_p)).reshape(phi.shape)
    assert np.allclose(fit.theta, theta, rtol=0, atol=1e-13) and np.allclose(fit.phi, phi, rtol=0, atol=1e-13)
    others = [m for m in ("exact", "rws", "wake-sleep") if m != method]
    for m in others:                                                   # the branches really differ on this problem
        other = wake_sleep_fit(x, m, K=K, n_steps=2, lr=lr, n_dreams=n_dreams, theta0=theta0, phi0=phi0, rng=s)
        assert not (np.allclose(other.theta, fit.theta, atol=1e-9) and np.allclose(other.phi, fit.phi, atol=1e-9))


def test_inverse_temperatures_outside_0_1_are_refused(ex):
    "Review 08f item 6: every TVO function refuses beta outside [0, 1], naming `betas`."
    for f in (lambda: tvo_integrand(TRUE_THETA, ex.phi, ex.x, [0.5, 1.5]),
              lambda: log_partition(TRUE_THETA, ex.phi, ex.x, [-0.1]),
              lambda: tvo_integrand_snis(np.zeros((3, 2)), [2.0]),
              lambda: expected_tvo_integrand_snis(TRUE_THETA, ex.phi, ex.x, [1.2], K=3)):
        with pytest.raises(ValueError, match="betas"):
            f()
