"""The problem set of the Monte Carlo chapter (nbs/exercises/03_montecarlo.ipynb): the solutions pass, typical wrong
answers fail (exercise_harness). The wrong answers are written as a student would write them, each with the mistake it
makes."""
import math

import numpy as np
from scipy import stats

from exercise_harness import chapter_tests


# mc.1: inverse CDF of the Kumaraswamy distribution
def _kum_swapped(a, b, n, rng):          # the exponents 1/a and 1/b swapped
    u = rng.random(n)
    return (1 - (1 - u) ** (1 / a)) ** (1 / b)

def _kum_not_inverted(a, b, n, rng):     # powers b and a where 1/b and 1/a belong
    u = rng.random(n)
    return (1 - (1 - u) ** b) ** a

def _kum_cdf_applied(a, b, n, rng):      # applies F to u instead of F^{-1}
    u = rng.random(n)
    return 1 - (1 - u ** a) ** b

def _kum_beta(a, b, n, rng):             # the Beta(a, b) law, which "looks much like" it (close only when a or b is near or below 1)
    return rng.beta(a, b, n)

def _kum_global_rng(a, b, n, rng):       # right formula, random numbers from np.random instead of rng
    u = np.random.random(n)
    return (1 - (1 - u) ** (1 / b)) ** (1 / a)


# mc.2: acceptance rate of the exponential envelope of a normal tail
def _tail_unnormalised(a, lam):          # 1/M for phi instead of phi / P(X > a): off by the tail probability
    x = max(a, lam)
    return math.exp(0.5 * x * x + 0.5 * math.log(2 * math.pi) + math.log(lam) - lam * (x - a))

def _tail_interior_always(a, lam):       # the maximiser x = lam even when it lies outside the support (lam < a)
    x = lam
    return math.exp(0.5 * x * x + 0.5 * math.log(2 * math.pi) + stats.norm.logsf(a) + math.log(lam) - lam * (x - a))

def _tail_M(a, lam):                     # returns M, not the acceptance rate 1/M
    x = max(a, lam)
    return math.exp(-(0.5 * x * x + 0.5 * math.log(2 * math.pi) + stats.norm.logsf(a) + math.log(lam) - lam * (x - a)))

def _tail_no_lam(a, lam):                # proposal density without its factor lam
    x = max(a, lam)
    return math.exp(0.5 * x * x + 0.5 * math.log(2 * math.pi) + stats.norm.logsf(a) - lam * (x - a))


# mc.3: rejection sampler for the normal tail
def _lam_star(a):
    return (a + math.sqrt(a * a + 4)) / 2

def _tail_accept_all(a, n, rng):         # no rejection step: returns the proposals a + Expon(lam*)
    return a + rng.exponential(1 / _lam_star(a), n)

def _tail_rejection(a, n, rng, shift, scale, centre):
    out, have = [], 0
    while have < n:
        x = shift + rng.exponential(scale, 2 * n)
        keep = rng.random(2 * n) <= np.exp(-0.5 * (x - centre) ** 2)
        out.append(x[keep]); have += int(keep.sum())
    return np.concatenate(out)[:n]

def _tail_numpy_scale(a, n, rng):        # rng.exponential(lam): numpy's argument is the scale, so the rate is 1/lam
    lam = _lam_star(a)
    return _tail_rejection(a, n, rng, a, lam, lam)

def _tail_accept_with_a(a, n, rng):      # acceptance probability exp(-(x - a)^2 / 2): a in place of lam
    lam = _lam_star(a)
    return _tail_rejection(a, n, rng, a, 1 / lam, a)

def _tail_no_half(a, n, rng):            # acceptance probability exp(-(x - lam)^2): the 1/2 dropped
    lam = _lam_star(a)
    out, have = [], 0
    while have < n:
        x = a + rng.exponential(1 / lam, 2 * n)
        keep = rng.random(2 * n) <= np.exp(-(x - lam) ** 2)
        out.append(x[keep]); have += int(keep.sum())
    return np.concatenate(out)[:n]

def _tail_unshifted(a, n, rng):          # forgets the shift: proposals Expon(lam), many below a
    lam = _lam_star(a)
    return _tail_rejection(a, n, rng, 0.0, 1 / lam, lam)


# mc.4: self-normalised importance sampling in log space
def _snis_unnormalised(fx, logw):        # the direct estimator mean(w f) with unnormalised weights
    w = np.exp(logw - logw.max()); W = w / w.sum(); est = np.mean(w * fx)
    return est, np.sqrt(W ** 2 @ (fx - est) ** 2), 1 / np.sum(W ** 2)

def _snis_naive_exp(fx, logw):           # right formulas, but exp(logw) overflows at +750 and underflows at -800
    with np.errstate(all="ignore"):
        w = np.exp(logw); W = w / w.sum(); est = W @ fx
        return est, np.sqrt(W ** 2 @ (fx - est) ** 2), 1 / np.sum(W ** 2)

def _snis_weighted_sd(fx, logw):         # W instead of W^2 in the standard error: the weighted sd of f
    W = np.exp(logw - logw.max()); W /= W.sum(); est = W @ fx
    return est, np.sqrt(W @ (fx - est) ** 2), 1 / np.sum(W ** 2)

def _snis_ess_unnormalised(fx, logw):    # ESS = 1 / sum w^2 with weights scaled to a largest value of 1, not summing to 1
    w = np.exp(logw - logw.max()); W = w / w.sum(); est = W @ fx
    return est, np.sqrt(W ** 2 @ (fx - est) ** 2), 1 / np.sum(w ** 2)


# mc.5: second moment of the weights for a shifted Gaussian proposal
def _m2_no_shift(mu, sigma):             # the centred formula, whatever mu
    v = 2 * sigma ** 2 - 1
    return math.inf if v <= 0 else sigma ** 2 / math.sqrt(v)

def _m2_rejection_threshold(mu, sigma):  # infinite for every sigma < 1, as for rejection sampling
    v = 2 * sigma ** 2 - 1
    return math.inf if sigma < 1 else sigma ** 2 / math.sqrt(v) * math.exp(mu ** 2 / v)

def _m2_half_exponent(mu, sigma):        # completing the square loses a factor 2: exp(mu^2 / (2 (2 sigma^2 - 1)))
    v = 2 * sigma ** 2 - 1
    return math.inf if v <= 0 else sigma ** 2 / math.sqrt(v) * math.exp(mu ** 2 / (2 * v))

def _m2_variance(mu, sigma):             # the variance E[w^2] - 1 instead of the second moment
    v = 2 * sigma ** 2 - 1
    return math.inf if v <= 0 else sigma ** 2 / math.sqrt(v) * math.exp(mu ** 2 / v) - 1


# mc.6: leading bias coefficient of self-normalised importance sampling
def _bias_sign(s):                       # the right size with the wrong sign
    return -s ** 2 * (s ** 2 - 1) / (2 * s ** 2 - 1) ** 1.5

def _bias_weight_variance(s):            # Var_q(w) = E_q[w^2] - 1, as if the bias were the weights' variance
    return s ** 2 / math.sqrt(2 * s ** 2 - 1) - 1

def _bias_cross_term_only(s):            # keeps -Cov(A, B) and forgets the I Var(B) term
    return -(s ** 2 / math.sqrt(2 * s ** 2 - 1) * s ** 2 / (2 * s ** 2 - 1) - 1)


# mc.8: control variate and antithetic pairs for E[e^U]
_e = math.e
_var_f = (_e ** 2 - 1) / 2 - (_e - 1) ** 2
_cov_fg = 1 - (_e - 1) / 2
_cov_anti = _e - (_e - 1) ** 2
_cv_ratio, _anti_ratio = 1 - 12 * _cov_fg ** 2 / _var_f, 1 + _cov_anti / _var_f


# mc.9: AIS log weights along a geometric path
def _ais_off_by_one(log_q0, log_gamma, xs, betas):     # betas[t] - betas[t - 1] with xs[t]: betas[-1] at t = 0
    return sum((betas[t] - betas[t - 1]) * (log_gamma(xs[t]) - log_q0(xs[t])) for t in range(len(xs)))

def _ais_no_q0(log_q0, log_gamma, xs, betas):          # the prior-path increments: log gamma alone
    return sum((betas[t + 1] - betas[t]) * log_gamma(xs[t]) for t in range(len(xs)))

def _ais_betas_not_diffs(log_q0, log_gamma, xs, betas):  # beta_t instead of beta_t - beta_{t-1}
    return sum(betas[t + 1] * (log_gamma(xs[t]) - log_q0(xs[t])) for t in range(len(xs)))

def _ais_telescoped(log_q0, log_gamma, xs, betas):     # "telescopes" a product whose factors sit at different states
    return log_gamma(xs[-1]) - log_q0(xs[0])


WRONG = {
    "mc.1": [_kum_swapped, _kum_not_inverted, _kum_cdf_applied, _kum_global_rng, _kum_beta],
    "mc.2": [_tail_unnormalised, _tail_interior_always, _tail_M, _tail_no_lam],
    "mc.3": [_tail_accept_all, _tail_numpy_scale, _tail_accept_with_a, _tail_unshifted, _tail_no_half],
    "mc.4": [_snis_unnormalised, _snis_naive_exp, _snis_weighted_sd, _snis_ess_unnormalised],
    "mc.5": [_m2_no_shift, _m2_rejection_threshold, _m2_half_exponent, _m2_variance],
    "mc.6": [_bias_sign, _bias_weight_variance, _bias_cross_term_only],
    "mc.7": [1.0,        # the width of the components (too narrow)
             1.2,        # just short of the plateau
             2.0,        # "wide is safe": too wide
             3.0],       # the widest of the grid
    "mc.8": [(6 * (3 - _e), _cv_ratio, _anti_ratio),               # c* with the wrong sign
             (-3 * _cov_fg, _cv_ratio, _anti_ratio),               # Var(U) = 1/3 instead of 1/12
             (-6 * (3 - _e), 1 / _cv_ratio, _anti_ratio),          # the variance ratio inverted
             (-6 * (3 - _e), _cv_ratio, _anti_ratio / 2),          # N antithetic pairs against N draws (2N evaluations)
             (-1.69, 0.0163, 0.0323)],                             # rounded to three significant digits
    "mc.9": [_ais_off_by_one, _ais_no_q0, _ais_betas_not_diffs, _ais_telescoped],
    "mc.10": ["a",       # "more temperatures always help": true only with moves
              "c",
              "d"],
}

test_solution_passes, test_wrong_answer_fails, test_every_checker_has_two_wrong_answers = chapter_tests("mc", WRONG)


def test_mc5_takes_a_number_in_any_wrapping(seed):
    "A right second moment returned as [v] or np.array([v]) passes; None gets the missing-return hint."
    from bayesnotes.exercises import check
    from exercise_harness import solutions
    right = solutions("mc")["is_second_moment"]
    for wrap in (lambda v: [v], lambda v: np.array([v]), np.float64):
        res = check("mc.5", lambda mu, sigma: wrap(right(mu, sigma)), rng=seed(17))
        assert res.passed, res.message
    res = check("mc.5", lambda mu, sigma: None, rng=seed(17))
    assert res.status == "failed" and "return" in res.message, res.message
