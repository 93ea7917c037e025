"""The problem set of the VI chapter (nbs/exercises/01_vi.ipynb): the solutions pass, typical wrong answers fail
(exercise_harness). Each wrong answer is a mistake a student makes, named in its comment."""
import numpy as np
import pytest
from scipy import special

from exercise_harness import chapter_tests


# vi.1: the ELBO of q = Ga(a, rate b) for x_n ~ Poisson(theta), theta ~ Ga(a0, rate b0)
def _pg_elbo(x, a0, b0, a, b, Elog=None, Etheta=None, entropy=1.0, log_fact=True, H_log_b=None):
    x = np.asarray(x, float)
    S, N = x.sum(), x.size
    Elog = special.digamma(a) - np.log(b) if Elog is None else Elog
    Etheta = a / b if Etheta is None else Etheta
    H = a + (-np.log(b) if H_log_b is None else H_log_b) + special.gammaln(a) + (1 - a) * special.digamma(a)
    return ((S + a0 - 1) * Elog - (N + b0) * Etheta - (special.gammaln(x + 1).sum() if log_fact else 0.0)
            + a0 * np.log(b0) - special.gammaln(a0) + entropy * H)


# vi.3: one CAVI sweep for x_n ~ N(mu, 1/tau), mu ~ N(mu0, 1/lam0), tau ~ Ga(a0, rate b0)
def _sweep(x, mu0, lam0, a0, b0, a, b, Etau=None, shape_extra=0.0, var_term=1.0, chapter_mean=False):
    x = np.asarray(x, float)
    N = x.size
    Et = a / b if Etau is None else Etau(a, b)
    l = lam0 + N * Et
    m = (lam0 * mu0 + x.sum()) / (lam0 + N) if chapter_mean else (lam0 * mu0 + Et * x.sum()) / l
    return m, l, a0 + N / 2 + shape_extra, b0 + 0.5 * (np.sum((x - m)**2) + var_term * N / l)


# vi.5 / vi.6: per-draw ELBO-gradient rows for q = N(m, s^2) in (m, log s)
def _reparam(entropy=1.0, wrt_s=False, sign=1.0):
    def rows(grad_logp, m, log_s, n, rng):
        s = np.exp(log_s)
        eps = rng.standard_normal(n)
        g = sign * grad_logp(m + s * eps)
        second = g * eps + entropy / s if wrt_s else g * s * eps + entropy
        return np.column_stack([g, second])
    return rows


def _score(with_logq=True, wrt_s=False, score_m=lambda eps, s: eps / s):
    def rows(logp, m, log_s, n, rng):
        s = np.exp(log_s)
        eps = rng.standard_normal(n)
        z = m + s * eps
        logq = -0.5 * eps**2 - log_s - 0.5 * np.log(2 * np.pi)
        score = np.column_stack([score_m(eps, s), (eps**2 - 1) / (s if wrt_s else 1.0)])
        return score * (logp(z) - (logq if with_logq else 0.0))[:, None]
    return rows


# vi.8: one SVI step for q(beta) in the hierarchical Poisson model
def _svi(scale_prior=False, rescale=True, shape_batch=False, plus_one=1.0):
    def step(x_batch, N, alpha, a0, b0, a_beta, b_beta, rho):
        x = np.asarray(x_batch, float)
        M = x.size
        El = (alpha + x) / (a_beta / b_beta + plus_one)
        r = N / M if rescale else 1.0
        if scale_prior:
            a_hat, b_hat = r * (a0 + M * alpha), r * (b0 + El.sum())
        else:
            a_hat, b_hat = a0 + (M if shape_batch else N) * alpha, b0 + r * El.sum()
        return (1 - rho) * a_beta + rho * a_hat, (1 - rho) * b_beta + rho * b_hat
    return step


# vi.10: Laplace approximations of theta^(a-1) exp(-b theta) in theta and in u = log theta
def _laplace(jacobian=True, sd=False, two_pi=True, gamma_moments=False):
    def approx(a, b):
        c = 0.5 * np.log(2 * np.pi) if two_pi else 0.0
        mt, vt = (a / b, a / b**2) if gamma_moments else ((a - 1) / b, (a - 1) / b**2)
        lt = (a - 1) * np.log(mt) - b * mt + c + 0.5 * np.log(vt)
        A = a if jacobian else a - 1
        mu, vu = np.log(A / b), 1 / A
        lu = A * mu - A + c + 0.5 * np.log(vu)
        f = np.sqrt if sd else (lambda v: v)
        return np.array([[mt, f(vt), lt], [mu, f(vu), lu]])
    return approx


def _kl_diag(s2, S):
    "KL(N(0, diag(s2)) || N(0, S))."
    return 0.5 * (np.sum(np.diag(np.linalg.inv(S)) * s2) - len(s2) + np.linalg.slogdet(S)[1] - np.sum(np.log(s2)))


WRONG = {
    "vi.1": [
        lambda x, a0, b0, a, b: _pg_elbo(x, a0, b0, a, b, log_fact=False),                 # drops sum log x_n!
        lambda x, a0, b0, a, b: _pg_elbo(x, a0, b0, a, b, Elog=np.log(a / b)),             # E log theta = log E theta
        lambda x, a0, b0, a, b: _pg_elbo(x, a0, b0, a, b, Elog=special.digamma(a) + np.log(b),
                                          Etheta=a * b),                                     # b read as a scale
        lambda x, a0, b0, a, b: _pg_elbo(x, a0, b0, a, b, Elog=special.digamma(a) + np.log(b),
                                          Etheta=a * b, H_log_b=np.log(b)),                  # ... in the entropy too
        lambda x, a0, b0, a, b: _pg_elbo(x, a0, b0, a, b, entropy=0.0),                    # forgets the entropy
    ],
    "vi.2": [
        [1.3862, 0.1239],     # the local optimum on the lighter mode at delta = 2.5
        [0.2877, 0.1037],     # KL(p || q) of the moment-matched fit at delta = 1.0
        [0.1239, 0.2877],     # the two numbers swapped
        [0.7580, 0.1037],     # the forward KL at both separations
    ],
    "vi.3": [
        lambda *args: _sweep(*args, shape_extra=0.5),                 # the chapter's a0 + (N + 1)/2 copied
        lambda *args: _sweep(*args, var_term=0.0),                    # E[(x_n - mu)^2] without the variance 1/l
        lambda *args: _sweep(*args, Etau=lambda a, b: b / a),         # E[tau] = b / a (rate read as scale)
        lambda *args: _sweep(*args, chapter_mean=True),               # the chapter's mu_N = (k0 mu0 + N xbar)/(k0 + N)
    ],
    "vi.4": [
        lambda S: _kl_diag(np.diag(S), S),                                                   # q keeps the marginal variances
        lambda S: 0.5 * (np.sum(np.log(np.diag(S))) - np.linalg.slogdet(S)[1]),              # min KL(p || q): other direction
        lambda S: -0.5 * np.log(1 - S[0, 1]**2 / (S[0, 0] * S[1, 1])),                        # the 2-d formula for every d
        lambda S: np.sum(np.log(np.diag(np.linalg.inv(S)))) + np.linalg.slogdet(S)[1],       # factor 1/2 lost
    ],
    "vi.5": [
        _reparam(entropy=0.0),            # forgets the entropy gradient (+1 in d/dlog s)
        _reparam(wrt_s=True),             # differentiates with respect to s instead of log s
        _reparam(sign=-1.0),              # sign error in the gradient of log p
    ],
    "vi.6": [
        _score(with_logq=False),                      # weights the score by log p alone (entropy gradient lost)
        _score(wrt_s=True),                           # score with respect to s instead of log s
        _score(score_m=lambda eps, s: eps),           # d log q / dm written (z - m) / s instead of (z - m) / s^2
    ],
    "vi.7": [
        [4.23, 255.2],        # ratios of variances instead of standard deviations
        [0.486, 0.0626],      # reparameterisation over score function
        [2.06, 2.06],         # forgot to rerun with C = -20
        [1.97, 1.97],         # with the baseline
        [2.21, 10.07],        # the d/dlog s component
    ],
    "vi.8": [
        _svi(scale_prior=True),           # N/M multiplies the prior as well
        _svi(rescale=False),              # no N/M: the batch sum taken for the full sum
        _svi(shape_batch=True),           # shape a0 + M alpha from the batch only
        _svi(plus_one=0.0),               # rate of q(lambda_n) without the Poisson's +1
    ],
    "vi.9": [
        [0.157, 0.157],       # the IWAE gap reported for the ELBO too
        [0.319, 0.319],       # the ELBO gap reported for IWAE_100 too (K = 1 twice)
        [0.319, 1.934],       # -log of the weight of the missed mode
        [-0.319, -0.157],     # bound minus log p(x) instead of log p(x) minus bound
        [0.319, 0.1666],      # the gap at K = 10 (exact) given for K = 100
        [0.319, 0.1635],      # the gap at K = 10 as estimated with 10^4 replicates at seed offset 2001
    ],
    "vi.10": [
        _laplace(jacobian=False),         # no Jacobian in log theta
        _laplace(sd=True),                # standard deviations instead of variances
        _laplace(two_pi=False),           # the Gaussian integral without 2 pi
        _laplace(gamma_moments=True),     # the Gamma's mean and variance instead of the mode and curvature
    ],
}

test_solution_passes, test_wrong_answer_fails, test_every_checker_has_two_wrong_answers = chapter_tests("vi", WRONG)


# correct answers entered with fewer digits than the cells print must pass
@pytest.mark.parametrize("ex_id,answer", [
    ("vi.2", [0.29, 0.12]),        # rounded to two decimals (exact 0.2877, 0.1239)
    ("vi.2", [0.288, 0.124]),
    ("vi.9", [0.319, 0.157]),      # exact 0.3188, 0.1572
    ("vi.9", [0.32, 0.157]),
])
def test_rounded_answer_passes(ex_id, answer, seed):
    from bayesnotes.exercises import check
    res = check(ex_id, answer, rng=seed(17))
    assert res.passed, res.message


# a typical mistake gets the hint that names it
@pytest.mark.parametrize("ex_id,j,words", [
    ("vi.1", 2, "rates, not scales"),                    # b read as a scale in the moments, entropy copied as given
    ("vi.1", 3, "rates, not scales"),                    # b read as a scale throughout
    ("vi.6", 1, "with respect to s, not log s"),
    ("vi.9", 4, "gap at K = 10"),
])
def test_mistake_gets_its_hint(ex_id, j, words, seed):
    from bayesnotes.exercises import check
    res = check(ex_id, WRONG[ex_id][j], rng=seed(17))
    assert not res.passed and words in res.message, res.message
