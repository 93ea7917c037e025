"""The problem set of the BNN chapter (nbs/exercises/07_bnn.ipynb): the solutions pass, plausible wrong answers fail
(exercise_harness)."""
import numpy as np
import pytest
from scipy import special, stats

from exercise_harness import chapter_tests


def _coverage_error(c):
    "Large-sample calibration error of central intervals whose sd is c times the true one."
    lv = np.round(np.arange(0.05, 0.951, 0.05), 2)
    return float(np.mean(np.abs(2 * stats.norm.cdf(c * stats.norm.ppf(0.5 + lv / 2)) - 1 - lv)))


# ---- shared pieces of the wrong answers -------------------------------------------------------------------------
def _unpack(theta, d, H, column_major=False):
    W1 = theta[:d * H].reshape(H, d).T if column_major else theta[:d * H].reshape(d, H)
    return W1, theta[d * H:d * H + H], theta[d * H + H:d * H + 2 * H], theta[-1]


def _prior_sd(d, H, alpha, beta, fan_in=True):
    a1, a2 = (alpha[0] / np.sqrt(d), alpha[1] / np.sqrt(H)) if fan_in else alpha
    return np.concatenate([np.full(d * H, a1), np.full(H, beta[0]), np.full(H, a2), [beta[1]]])


def _log_joint(theta, X, y, hidden, alpha, beta, noise_std, fan_in=True, column_major=False, consts=True,
               lik_scale=None, prior=True, prior_norm=True, lik_norm=True, act=np.tanh):
    d, H = X.shape[1], hidden
    W1, b1, w2, b2 = _unpack(theta, d, H, column_major)
    f = act(X @ W1 + b1) @ w2 + b2
    s = _prior_sd(d, H, alpha, beta, fan_in)
    sig = noise_std if lik_scale is None else lik_scale
    lp = stats.norm.logpdf(theta, 0, s).sum() if prior else 0.
    ll = stats.norm.logpdf(y, f, sig).sum()
    if not consts:                   # the -log(2 pi) / 2 terms dropped, the -log(sd) terms kept
        lp += 0.5 * np.log(2 * np.pi) * theta.size * prior
        ll += 0.5 * np.log(2 * np.pi) * len(y)
    if not prior_norm:               # the whole -log(sqrt(2 pi) s_i) of every prior factor dropped
        lp += (0.5 * np.log(2 * np.pi) + np.log(s)).sum()
    if not lik_norm:                 # the whole -log(sqrt(2 pi) sigma) of every likelihood factor dropped
        ll += len(y) * (0.5 * np.log(2 * np.pi) + np.log(sig))
    return lp + ll


def _prior_var(X, hidden, alpha, beta, half=0.5, width=1, fan_in=True, sd=False):
    d = X.shape[1]
    v1 = alpha[0] ** 2 * np.sum(X ** 2, 1) / (d if fan_in else 1) + beta[0] ** 2
    v = beta[1] ** 2 + width * alpha[1] ** 2 * v1 * half
    return np.sqrt(v) if sd else v


def _mixture(y, f, sig, logw, how):
    lp = stats.norm.logpdf(y, f, (sig ** 2 if how == "variance" else sig)[:, None])
    lw = logw - special.logsumexp(logw)
    if how == "naive":               # exp, average, log: underflows to log(0) for far targets and overflows for big weights
        with np.errstate(all="ignore"):
            w = np.exp(logw) / np.exp(logw).sum()
            return np.mean(np.log(w @ np.exp(lp)))
    if how == "jensen":              # weighted mean of log densities: a lower bound, not the mixture
        return np.mean(np.exp(lw) @ lp)
    if how == "unnormalised":        # log weights used as they come
        return np.mean(special.logsumexp(lp + logw[:, None], axis=0))
    if how == "uniform":             # weights ignored
        return np.mean(special.logsumexp(lp, axis=0) - np.log(len(sig)))
    if how == "variance":            # the noise variance used as the sd
        return np.mean(special.logsumexp(lp + lw[:, None], axis=0))


def _kl_grad(mu, rho, s, how):
    sig, dsig = np.logaddexp(0, rho), special.expit(rho)
    g_sigma = sig / s ** 2 - 1 / sig
    g_mu = mu / s ** 2
    return {"sigma": (g_mu, g_sigma),                      # gradient in sigma reported as the one in rho: no Jacobian
            "exp": (g_mu, g_sigma * np.exp(rho)),          # d softplus / d rho taken as exp(rho)
            "sign": (g_mu, -g_sigma * dsig),               # sign of the rho gradient flipped
            "mu_s": (mu / s, g_sigma * dsig),              # prior variance taken as s, not s^2, in the mu gradient
            }[how]


def _reparam_exact(mu, rho, Phi, y, noise_std):
    "Mean and sd of every coordinate of the one-draw reparameterised gradient, written anew (see the solutions)."
    c, A = Phi.T @ (y - Phi @ mu) / noise_std ** 2, Phi.T @ Phi / noise_std ** 2
    B, e = A * np.logaddexp(0, rho)[None, :], special.expit(rho)
    row = (B ** 2).sum(1)
    return np.r_[c, -np.diag(B) * e], np.r_[np.sqrt(row), e * np.sqrt(c ** 2 + np.diag(B) ** 2 + row)]


def _reparam(mu, rho, Phi, y, noise_std, n_draws, rng, how):
    if how in ("noisy", "moments"):  # the exact mean plus noise: N(0, 1), or with the exact sd of each coordinate
        m, sd = _reparam_exact(mu, rho, Phi, y, noise_std)
        return m + (1. if how == "noisy" else sd) * rng.standard_normal((n_draws, m.size))
    if how == "score":               # score-function estimator with a mean baseline: unbiased, not reparameterised
        sq = np.logaddexp(0, rho)
        eps = rng.standard_normal((n_draws, mu.size))
        h = stats.norm.logpdf(y, (mu + sq * eps) @ Phi.T, noise_std).sum(1)
        h = (h - h.mean())[:, None]
        return np.concatenate([h * eps / sq, h * (eps ** 2 - 1) / sq * special.expit(rho)], axis=1)
    sig = np.exp(rho) if how == "exp" else np.logaddexp(0, rho)
    eps = rng.standard_normal((1 if how == "one_eps" else n_draws, mu.size)) * np.ones((n_draws, 1))
    theta = mu + sig * eps
    g = (y - theta @ Phi.T) @ Phi / noise_std ** 2
    if how == "mean":
        g = g / len(y)
    dsig = np.exp(rho) if how == "exp" else special.expit(rho)
    if how == "two_eps":             # a second, fresh epsilon in the gradient in rho
        eps = rng.standard_normal((n_draws, mu.size))
    g_rho = {"no_sigmoid": g * eps, "no_eps": g * dsig}.get(how, g * eps * dsig)
    out = np.concatenate([g, g_rho], axis=1)
    return -out if how == "sign" else out


def _dropout(params, X, hidden, p, how):
    d, H = X.shape[1], hidden
    W1, b1, w2, b2 = _unpack(params, d, H, column_major=how == "column_major")
    h = np.maximum(X @ W1 + b1, 0)
    if how == "column_major":        # W1 unpacked column by column
        return (1 - p) * h @ w2 + b2, p * (1 - p) * (h ** 2) @ (w2 ** 2)
    if how == "monte_carlo":         # moments of 20000 sampled masks instead of the closed form
        z = np.random.default_rng(0).random((20000, 1, H)) < 1 - p
        F = (z * h) @ w2 + b2
        return F.mean(0), F.var(0)
    if how == "inverted":            # PyTorch's convention: kept units scaled by 1 / (1 - p)
        return h @ w2 + b2, p / (1 - p) * (h ** 2) @ (w2 ** 2)
    if how == "shared":              # one mask for the whole layer
        return (1 - p) * h @ w2 + b2, p * (1 - p) * (h @ w2) ** 2
    if how == "no_keep":             # mean without the keep probability
        return h @ w2 + b2, p * (1 - p) * (h ** 2) @ (w2 ** 2)
    if how == "var_p":               # Bernoulli variance taken as p
        return (1 - p) * h @ w2 + b2, p * (h ** 2) @ (w2 ** 2)


def _jac(theta, x, tanh_prime=lambda t: 1 - t ** 2):
    w1, b1, w2, b2 = theta
    t = np.tanh(w1 * x + b1)
    return np.column_stack([w2 * tanh_prime(t) * x, w2 * tanh_prime(t), t, np.ones_like(x)])


def _laplace(theta, x, y, x_star, s, sigma, how):
    tp = (lambda t: 1 - t) if how == "tanh" else (lambda t: 1 - t ** 2)
    J, Js = _jac(theta, x, tp), _jac(theta, x_star, tp)
    G = J.T @ J / (1. if how == "no_sigma" else sigma ** 2)
    prior = {"prec_s": np.diag(1 / s), "no_prior": 0. * np.eye(4)}.get(how, np.diag(1 / s ** 2))
    Lam = G + prior
    if how == "hessian":             # the exact Hessian: the GGN plus the residual term, by finite differences of J
        w = np.asarray(theta, float)
        r = (y - (w[2] * np.tanh(w[0] * x + w[1]) + w[3])) / sigma ** 2
        h = 1e-5
        for k in range(4):
            e = np.zeros(4); e[k] = h
            dJ = (_jac(w + e, x) - _jac(w - e, x)) / (2 * h)
            Lam[:, k] -= r @ dJ
        Lam = (Lam + Lam.T) / 2
    v = np.einsum("ij,ji->i", Js, np.linalg.solve(Lam, Js.T))
    return v + sigma ** 2 if how == "plus_noise" else v


def _blr(Phi, y, Phi_star, s, sigma, T, how):
    if how == "temper_lik":          # p(D | w)^(1/T) p(w): the likelihood tempered, the prior not
        Lam = Phi.T @ Phi / (T * sigma ** 2) + np.diag(1 / s ** 2)
        m = np.linalg.solve(Lam, Phi.T @ y / (T * sigma ** 2))
        v = np.einsum("ij,ji->i", Phi_star, np.linalg.solve(Lam, Phi_star.T))
        return Phi_star @ m, np.sqrt(v + sigma ** 2)
    Lam = Phi.T @ Phi / sigma ** 2 + np.diag(1 / s if how == "prec_s" else 1 / s ** 2)
    m = np.linalg.solve(Lam, Phi.T @ y / sigma ** 2)
    v = np.einsum("ij,ji->i", Phi_star, np.linalg.solve(Lam, Phi_star.T))
    var = {"variance": T * v + sigma ** 2, "no_noise": T * v, "temper_noise": T * (v + sigma ** 2),
           "inverse_T": v / T + sigma ** 2, "ignore_T": v + sigma ** 2}[how]
    return Phi_star @ m, (var if how == "variance" else np.sqrt(var))


def _ekf(mean, cov, f_mean, jac, y, R, how, gain=None):
    "One EKF update of N(mean, cov), right or with one typical mistake (the gain, if given, used as the mistake allows)."
    S = np.linalg.inv(cov) if how == "precision" else cov   # the precision used where the covariance belongs
    s = R if how == "no_spread" else jac @ S @ jac + R       # "no_spread": innovation variance taken as the noise alone
    k = S @ jac / s if gain is None or how == "kalman_gain" else np.asarray(gain, float)
    r = (f_mean - y) if how == "sign" else (y - f_mean)
    A = np.eye(len(mean)) - np.outer(k, jac)
    if how == "inner":               # k @ k.T of a 1-D k: the inner product, a number, subtracted from every entry
        new = S - s * (k @ k.T)
    elif how == "no_s":              # k k^T without the innovation variance
        new = S - np.outer(k, k)
    elif how == "stale":             # the covariance never updated
        new = S
    elif how in ("short", "no_spread"):   # the short form S - s k k^T, right for the Kalman gain (of this s) only
        new = S - s * np.outer(k, k)
    elif how == "one_sided":         # (I - k J) S, right (and symmetric) for the Kalman gain only
        new = A @ S
    elif how == "no_noise":          # the Joseph form without the noise term R k k^T
        new = A @ S @ A.T
    else:                            # the Joseph form (the Kalman gain when none is given, or "kalman_gain": gain ignored)
        new = A @ S @ A.T + R * np.outer(k, k)
    return mean + k * r, new


def _linear_shift():
    "bnn.15's third number, max |posterior mean - prior mean| of the last-layer linear model, from the package."
    from bayesnotes.bnn import toy_regression_data
    from bayesnotes.sequential import linear_posterior, toy_prior
    X, y = toy_regression_data(20, rng=5)
    m0, S0 = toy_prior(rng=1)
    Phi = np.column_stack([np.tanh(X @ m0[:10][None, :] + m0[10:20]), np.ones(20)])
    return float(np.abs(linear_posterior(Phi, y, m0[-11:], S0[-11:, -11:], 0.09).mean - m0[-11:]).max())


LIN15 = _linear_shift()


WRONG = {
    "bnn.1": [
        lambda th, X, y, H, a, b, s: _log_joint(th, X, y, H, a, b, s, consts=False),        # no 2 pi constants
        lambda th, X, y, H, a, b, s: _log_joint(th, X, y, H, a, b, s, fan_in=False),        # weight sd alpha, not alpha/sqrt(fan-in)
        lambda th, X, y, H, a, b, s: _log_joint(th, X, y, H, a, b, s, column_major=True),   # W1 unpacked column by column
        lambda th, X, y, H, a, b, s: _log_joint(th, X, y, H, a, b, s, lik_scale=s ** 2),    # noise variance used as the sd
        lambda th, X, y, H, a, b, s: _log_joint(th, X, y, H, a, b, s, prior=False),         # the log likelihood only
        lambda th, X, y, H, a, b, s: _log_joint(th, X, y, H, a, b, s, prior_norm=False),    # the chapter's formula
        lambda th, X, y, H, a, b, s: _log_joint(th, X, y, H, a, b, s, prior_norm=False, lik_norm=False),  # no constants
        lambda th, X, y, H, a, b, s: _log_joint(th, X, y, H, a, b, s, act=lambda u: np.maximum(u, 0)),  # relu
    ],
    "bnn.2": [
        lambda X, H, a, b: _prior_var(X, H, a, b, half=1.0),          # E relu(a)^2 taken as Var a (no 1/2)
        lambda X, H, a, b: _prior_var(X, H, a, b, width=H),           # output weight variance alpha_2^2, not alpha_2^2 / H
        lambda X, H, a, b: _prior_var(X, H, a, b, fan_in=False),      # first layer without the fan-in
        lambda X, H, a, b: _prior_var(X, H, a, b, sd=True),           # a standard deviation
    ],
    "bnn.3": [
        lambda y, f, s, lw: _mixture(y, f, s, lw, "naive"),           # exp, then log: under- and overflow
        lambda y, f, s, lw: _mixture(y, f, s, lw, "jensen"),          # mean of log densities (Jensen's lower bound)
        lambda y, f, s, lw: _mixture(y, f, s, lw, "unnormalised"),    # weights not normalised
        lambda y, f, s, lw: _mixture(y, f, s, lw, "uniform"),         # weights ignored
        lambda y, f, s, lw: _mixture(y, f, s, lw, "variance"),        # noise variance used as the sd
    ],
    "bnn.4": [
        (0.1320, 0.2108),            # the two numbers swapped
        (0.0, 0.0),                  # calibrated intervals (the sd never changed)
        (0.2108, 0.2108),            # "too wide is as bad as too narrow": true only for 0.5 and 2
        (_coverage_error(0.5 ** 0.5), _coverage_error(1.5 ** 0.5)),  # the variance scaled by c, not the sd
    ],
    "bnn.5": [
        lambda mu, rho, s: _kl_grad(mu, rho, s, "sigma"),
        lambda mu, rho, s: _kl_grad(mu, rho, s, "exp"),
        lambda mu, rho, s: _kl_grad(mu, rho, s, "sign"),
        lambda mu, rho, s: _kl_grad(mu, rho, s, "mu_s"),
    ],
    "bnn.6": [
        lambda *a: _reparam(*a, how="no_sigmoid"),   # d sigma / d rho forgotten
        lambda *a: _reparam(*a, how="no_eps"),       # d theta / d sigma = eps forgotten
        lambda *a: _reparam(*a, how="one_eps"),      # one epsilon shared by every row
        lambda *a: _reparam(*a, how="mean"),         # gradient of the mean log-likelihood, not the sum
        lambda *a: _reparam(*a, how="exp"),          # sigma = exp(rho) instead of softplus(rho)
        lambda *a: _reparam(*a, how="sign"),         # gradient of the negative log-likelihood
        lambda *a: _reparam(*a, how="two_eps"),      # a fresh epsilon for the gradient in rho
        lambda *a: _reparam(*a, how="noisy"),        # exact gradient plus N(0, 1) noise (passed the mean-only checker)
        lambda *a: _reparam(*a, how="moments"),      # exact mean plus noise of the exact sd (also passed it)
        lambda *a: _reparam(*a, how="score"),        # score function with a baseline (passed it now and then)
    ],
    "bnn.7": [
        lambda th, X, H, p: _dropout(th, X, H, p, "inverted"),
        lambda th, X, H, p: _dropout(th, X, H, p, "shared"),
        lambda th, X, H, p: _dropout(th, X, H, p, "no_keep"),
        lambda th, X, H, p: _dropout(th, X, H, p, "var_p"),
        lambda th, X, H, p: _dropout(th, X, H, p, "column_major"),
        lambda th, X, H, p: _dropout(th, X, H, p, "monte_carlo"),
    ],
    "bnn.9": [
        (1.0, 1.0),                  # "every ensemble samples the posterior"
        (0.0, 0.0),                  # anchored=True forgotten in the second run
        (1.0, 0.0),                  # swapped
        (0.0, 0.05),                 # divided by the prior variance of the slope
    ],
    "bnn.10": [
        lambda *a: _laplace(*a, how="plus_noise"),   # the variance of y, not of f
        lambda *a: _laplace(*a, how="prec_s"),       # prior precision 1 / s
        lambda *a: _laplace(*a, how="hessian"),      # exact Hessian instead of the GGN
        lambda *a: _laplace(*a, how="tanh"),         # tanh' taken as 1 - tanh
        lambda *a: _laplace(*a, how="no_sigma"),     # J^T J without the noise variance
    ],
    "bnn.11": [
        lambda *a: _blr(*a, how="variance"),         # variance instead of sd
        lambda *a: _blr(*a, how="no_noise"),         # spread of f only
        lambda *a: _blr(*a, how="temper_noise"),     # the noise tempered too
        lambda *a: _blr(*a, how="inverse_T"),        # covariance Lambda^-1 / T
        lambda *a: _blr(*a, how="ignore_T"),         # temperature ignored
        lambda *a: _blr(*a, how="temper_lik"),       # only the likelihood tempered
    ],
    "bnn.12": [
        (0.01915, 4 * 0.01915),      # first-order law: step size proportional to the batch size
        (0.01856, 0.06323),          # the crossings of the bias, not the slope
        (0.0667, 0.0191),            # swapped
        (0.0197, 0.0687),            # read off a coarse grid (3% off)
    ],
    "bnn.14": [
        lambda *a: _ekf(*a, how="stale"),            # the covariance not updated
        lambda *a: _ekf(*a, how="precision"),        # the prior precision used instead of the covariance
        lambda *a: _ekf(*a, how="inner"),            # a missing outer product: k @ k.T of a 1-D array
        lambda *a: _ekf(*a, how="sign"),             # innovation f - y
        lambda *a: _ekf(*a, how="no_s"),             # covariance loses k k^T, not s k k^T
        lambda *a: _ekf(*a, how="no_spread"),        # innovation variance R, without J Sigma J^T
        lambda *a, gain=None: _ekf(*a, how="short", gain=gain),        # S - s k k^T with a gain that is not Kalman's
        lambda *a, gain=None: _ekf(*a, how="one_sided", gain=gain),    # (I - k J) S with such a gain
        lambda *a, gain=None: _ekf(*a, how="no_noise", gain=gain),     # the Joseph form without R k k^T
        lambda *a, gain=None: _ekf(*a, how="kalman_gain", gain=gain),  # the given gain ignored
        lambda *a, gain=None: tuple(v * 1.0000003 for v in _ekf(*a, how="joseph", gain=gain)),  # off by 3e-7 in float64
    ],
    "bnn.15": [
        (0.0, 0.0, 0.0),             # the same order twice (or started at the zero prior mean)
        (0.2559, 1.9619, LIN15),     # the two network numbers swapped
        (1.5198, 0.2559, LIN15),     # noise sd 0.3 used as the variance
        (1.9619, 0.2559, 0.05),      # the linear model run on other features, or in one order against another model
        (1.99, 0.2559, LIN15),       # read too roughly (1.4% off)
        (1.9619, 0.2559, 0.0),       # the linear model's order difference typed in (or computed) instead of its move
        (1.9619, 0.2559, 1e-16),     # the same, as rounding error
    ],
}

test_solution_passes, test_wrong_answer_fails, test_every_checker_has_two_wrong_answers = chapter_tests("bnn", WRONG)


# The hint each wrong answer is meant to get (a substring of it), where the checker names the mistake (every wrong
# answer of bnn.6 is here, so its messages are also checked for the exact gradient, which must never be shown).
HINTS = [
    ("bnn.1", 0, "lacks the -log(2 pi) / 2"),
    ("bnn.1", 1, "alpha_l / sqrt(fan-in)"),
    ("bnn.1", 2, "W1 is stored row by row"),
    ("bnn.1", 3, "noise_std is a standard deviation"),
    ("bnn.1", 4, "includes the log prior"),
    ("bnn.1", 5, "the chapter's formula"),
    ("bnn.1", 6, "dropped every normalising constant"),
    ("bnn.1", 7, "default activation is relu"),
    ("bnn.3", 4, "noise_std is a standard deviation"),
    ("bnn.6", 0, "d softplus(rho) / d rho"),
    ("bnn.6", 1, "d theta / d sigma_q = eps"),
    ("bnn.6", 2, "fresh epsilon for every row"),
    ("bnn.6", 3, "mean log-likelihood"),
    ("bnn.6", 4, "not exp(rho)"),
    ("bnn.6", 5, "negative log-likelihood"),
    ("bnn.6", 6, "with the same eps that made theta"),
    # exact mean plus N(0, 1) noise: when a case's reparameterised variance is below 1/2 (some random cases; seed offset
    # 180 draws one), this answer varies more than twice as much and gets the noise hint, which names its mistake too
    ("bnn.6", 7, ("with a fresh eps ~ N(0, I)", "an unbiased estimate plus noise is not this estimator")),
    ("bnn.6", 8, "with a fresh eps ~ N(0, I)"),
    ("bnn.6", 9, "score-function estimator"),
    ("bnn.7", 0, "inverted dropout"),
    ("bnn.7", 1, "its own mask"),
    ("bnn.7", 4, "W1 is stored row by row"),
    ("bnn.7", 5, "Monte Carlo"),
    ("bnn.11", 5, "tempers the likelihood only"),
    ("bnn.14", 0, "the covariance is the one you were given"),
    ("bnn.14", 1, "not its inverse (the precision)"),
    ("bnn.14", 2, "np.outer(k, k)"),
    ("bnn.14", 3, "the observation minus its prediction"),
    ("bnn.14", 4, "not k k^T"),
    ("bnn.14", 5, "not the noise alone"),
    ("bnn.14", 6, "only for the Kalman gain k = cov jac^T / s (and k = 0)"),
    ("bnn.14", 7, "not even symmetric"),
    ("bnn.14", 8, "its share of the error covariance is missing"),
    ("bnn.14", 9, "use the gain you are given"),
    ("bnn.15", 0, "your two network numbers are zero"),
    ("bnn.15", 1, "the order is"),
    ("bnn.15", 2, "noise_var is a variance"),
    ("bnn.15", 3, "not what the stream gives"),
    ("bnn.15", 5, "your linear-model number is (nearly) zero"),
    ("bnn.15", 6, "your linear-model number is (nearly) zero"),
]


@pytest.mark.parametrize("ex_id,j,hint", HINTS, ids=[f"{i}-wrong{j}" for i, j, _ in HINTS])
def test_wrong_answer_gets_its_hint(ex_id, j, hint, seed):
    from bayesnotes.exercises import check
    res = check(ex_id, WRONG[ex_id][j], rng=seed(17))
    hints = hint if isinstance(hint, tuple) else (hint,)           # a tuple: any of these hints is right
    assert not res.passed and any(h in res.message for h in hints), res.message
    assert ex_id != "bnn.6" or "expected:" not in res.message, res.message   # the exact gradient is never shown


def test_bnn14_accepts_float32(seed):
    "A correct update computed (or returned) in float32 passes bnn.14: the tolerance follows the answer's precision."
    from bayesnotes.exercises import check

    def in_float32(mean, cov, f_mean, jac, y, noise_var, gain=None):
        f = np.float32
        args = [np.asarray(v, f) for v in (mean, cov, jac)]
        k = None if gain is None else np.asarray(gain, f)
        out = _ekf(args[0], args[1], f(f_mean), args[2], f(y), f(noise_var), "joseph", gain=k)
        return tuple(v.astype(f) for v in out)       # (np.eye inside _ekf is float64; a float32 program returns float32)

    def cast_float32(*a, gain=None):
        return tuple(v.astype(np.float32) for v in _ekf(*a, "joseph", gain=gain))
    for answer in (in_float32, cast_float32):
        res = check("bnn.14", answer, rng=seed(17))
        assert res.passed, res.message
        assert all(np.asarray(v).dtype == np.float32 for v in answer(np.zeros(2), np.eye(2), 0., np.ones(2), 1., 1.))


def test_bnn14_near_miss_names_its_size(seed):
    "A float64 answer off by 3e-7 fails, and the message states the size of the miss (not two identical printouts)."
    from bayesnotes.exercises import check
    res = check("bnn.14", WRONG["bnn.14"][10], rng=seed(17))
    assert not res.passed and "its largest error is 3.0e-07" in res.message, res.message


def test_bnn14_fallback_hint_points_to_the_chapter(seed):
    "An unrecognised wrong update gets a pointer to 7b's equation, not the update itself."
    from bayesnotes.exercises import check
    res = check("bnn.14", lambda *a, gain=None: tuple(v * 1.01 for v in _ekf(*a, "joseph", gain=gain)), rng=seed(17))
    assert not res.passed and "eq-seq-kalman in section 2 of 7b" in res.message, res.message
    assert "k (y - f_mean)" not in res.message and "cov - s k k^T" not in res.message, res.message
