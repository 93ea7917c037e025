"""The problem set of chapter 9 (nbs/exercises/09_workflow.ipynb): every solution passes its checker and plausible wrong
answers fail, at every seed offset (exercise_harness)."""
import math

import numpy as np
from scipy import stats
from scipy.special import logsumexp
from bayesnotes.workflow import psis, gpd_fit, gpd_quantile

from exercise_harness import chapter_tests

# ---- workflow.1
def _wm(r, s, *, const=True, s_var=True, cond=True):
    v = s ** 2 if s_var else s
    a = r + (1 - r) / v
    if cond and a <= 0:
        return np.inf
    return (s ** (r - 1) if const else 1.0) / np.sqrt(a) if a > 0 else np.nan
moment_no_const = lambda r, s: _wm(r, s, const=False)
moment_s_as_var = lambda r, s: _wm(r, s, s_var=False)
moment_never_inf = lambda r, s: _wm(r, s, cond=False)
def moment_half_k(r, s):                   # diverges from r > 1/(2k): the variance condition applied to every moment
    if s < 1 and r >= 0.5 / (1 - s * s):
        return np.inf
    return s ** (r - 1) / np.sqrt(r + (1 - r) / s ** 2)
moment_inverted_power = lambda r, s: (np.inf if r + (1 - r) / s ** 2 <= 0 else s ** (1 - r) / np.sqrt(r + (1 - r) / s ** 2))
def _limit_sd(r, s, gap):                  # the divergence limit at 1/(1 - s) (sd for variance), the formula elsewhere
    if s < 1 and r >= 1 / (1 - s):
        return np.inf
    c = r + (1 - r) / s ** 2
    return s ** (r - 1) / np.sqrt(c) if c > 0 else gap
moment_limit_sd_nan = lambda r, s: _limit_sd(r, s, np.nan)      # NaN in the gap [1/k, 1/(1 - s))
moment_limit_sd_big = lambda r, s: _limit_sd(r, s, 1e150)       # a huge finite number there

# ---- workflow.2
def _ps(lw, *, cap=True, p_kind="mid", norm=True, add_u=True, M_kind="both", smooth=True):
    lw = np.asarray(lw, float); S = lw.size
    M = int(np.ceil(min(S / 5, 3 * np.sqrt(S)))) if M_kind == "both" else int(np.ceil(S / 5))
    x = lw - lw.max(); o = np.argsort(x); w = np.exp(x[o]); u = w[S - M - 1]
    k, sig = gpd_fit(w[S - M:] - u)
    p = (np.arange(1, M + 1) - 0.5) / M if p_kind == "mid" else np.arange(1, M + 1) / (M + 1)
    q = gpd_quantile(p, k, sig) + (u if add_u else 0.0)
    if cap: q = np.minimum(q, 1.0)
    if smooth: x[o[S - M:]] = np.log(q)
    return (x - logsumexp(x) if norm else x), k
ps_no_cap = lambda lw: _ps(lw, cap=False)
ps_p_over_m1 = lambda lw: _ps(lw, p_kind="plus1")
ps_not_normalised = lambda lw: _ps(lw, norm=False)
ps_no_u = lambda lw: _ps(lw, add_u=False)
ps_m_fifth = lambda lw: _ps(lw, M_kind="fifth")
ps_raw = lambda lw: _ps(lw, smooth=False)

# ---- workflow.3
def _loo(ll, kind):
    ll = np.asarray(ll, float); S, n = ll.shape
    lppd_i = logsumexp(ll, axis=0) - np.log(S)
    if kind == "lppd": elpd_i = lppd_i
    elif kind == "raw": elpd_i = -(logsumexp(-ll, axis=0) - np.log(S))
    elif kind == "flip": elpd_i = logsumexp(psis(ll).log_weights + ll, axis=0)
    else: elpd_i = logsumexp(psis(-ll).log_weights + ll, axis=0)
    se = np.sqrt(n * np.var(elpd_i, ddof=1 if kind == "ddof1" else 0))
    p = lppd_i.sum() - elpd_i.sum()
    return float(elpd_i.sum()), float(se), float(-p if kind == "psign" else p)
loo_lppd = lambda ll: _loo(ll, "lppd")
loo_raw = lambda ll: _loo(ll, "raw")
loo_flip = lambda ll: _loo(ll, "flip")
loo_ddof1 = lambda ll: _loo(ll, "ddof1")
loo_psign = lambda ll: _loo(ll, "psign")

# ---- workflow.4
def _sbc(prior_draw, simulate, fit, R, L, rng, kind):
    ranks = np.empty(R, dtype=int); prev = None
    for r in range(R):
        theta = prior_draw(rng)
        y = simulate(0.0 if kind == "fixed_theta" else theta, rng)
        if kind == "lag":
            y, prev = (prev if prev is not None else y), y
        draws = np.asarray(fit(y, L, rng))
        if kind == "fresh_truth":
            theta = prior_draw(rng)
        ranks[r] = np.sum(draws < theta) + (1 if kind == "plus1" else 0)
    if kind == "random":
        return rng.integers(0, L + 1, R)
    return ranks
sbc_random = lambda *a: _sbc(*a, "random")
sbc_fixed_theta = lambda *a: _sbc(*a, "fixed_theta")
sbc_fresh_truth = lambda *a: _sbc(*a, "fresh_truth")
sbc_lag = lambda *a: _sbc(*a, "lag")
sbc_plus1 = lambda *a: _sbc(*a, "plus1")
def sbc_above(prior_draw, simulate, fit, R, L, rng):     # ranks counted from the top: draws above the truth
    return L - _sbc(prior_draw, simulate, fit, R, L, rng, "ok")
def sbc_l_minus_1(prior_draw, simulate, fit, R, L, rng):  # asks the fit for L - 1 draws: ranks on 0..L-1
    ranks = np.empty(R, dtype=int)
    for r in range(R):
        theta = prior_draw(rng)
        draws = np.asarray(fit(simulate(theta, rng), L - 1, rng))
        ranks[r] = np.sum(draws < theta)
    return ranks
def sbc_fraction(prior_draw, simulate, fit, R, L, rng):
    return _sbc(prior_draw, simulate, fit, R, L, rng, "ok") / L

# ---- workflow.6
def _ppp(y, sigma, tau, kind):
    y = np.asarray(y, float); n, ybar = y.size, y.mean()
    prec = 1 / tau ** 2 + n / sigma ** 2; m = n * ybar / sigma ** 2 / prec
    var = {"ok": 1 / prec + sigma ** 2 / n, "no_post": sigma ** 2 / n, "sigma2": 1 / prec + sigma ** 2, "post_only": 1 / prec}[kind if kind in ("no_post", "sigma2", "post_only") else "ok"]
    if kind == "prior":
        return float(stats.norm.sf(ybar / np.sqrt(tau ** 2 + sigma ** 2 / n)))
    p = float(stats.norm.sf((ybar - m) / np.sqrt(var)))
    return 1 - p if kind == "flip" else p
ppp_flip = lambda *a: _ppp(*a, "flip")
ppp_no_post = lambda *a: _ppp(*a, "no_post")
ppp_sigma2 = lambda *a: _ppp(*a, "sigma2")
ppp_prior = lambda *a: _ppp(*a, "prior")
ppp_post_only = lambda *a: _ppp(*a, "post_only")

# ---- workflow.7
def _bf(y, sigma, tau, kind="ok"):
    y = np.asarray(y, float); n, ybar = y.size, y.mean()
    t2 = tau if kind == "tau_var" else tau ** 2
    r = n * t2 / sigma ** 2
    v = (0.5 * np.log1p(r) if kind != "no_det" else 0.0) - n * ybar ** 2 / (2 * sigma ** 2) * r / (1 + r)
    return float(-v if kind == "flip" else v)
bf_flip = lambda *a: _bf(*a, kind="flip")
bf_no_det = lambda *a: _bf(*a, kind="no_det")
bf_tau_var = lambda *a: _bf(*a, kind="tau_var")
def bf_one_obs(y, sigma, tau):
    return _bf(np.asarray(y)[:1], sigma, tau)
def bf_mvn(y, sigma, tau):                   # a correct but naive route (must PASS): multivariate normal densities
    y = np.asarray(y, float); n = y.size
    return float(stats.multivariate_normal(np.zeros(n), sigma ** 2 * np.eye(n)).logpdf(y)
                 - stats.multivariate_normal(np.zeros(n), sigma ** 2 * np.eye(n) + tau ** 2 * np.ones((n, n))).logpdf(y))

# ---- workflow.8
hm_one_minus = lambda n, s, t: s ** 2 / (s ** 2 + n * t ** 2)
hm_no_prior = lambda n, s, t: n * t ** 2 / s ** 2
hm_double = lambda n, s, t: 2 * n * t ** 2 / (s ** 2 + n * t ** 2)
hm_sd = lambda n, s, t: n * t / (s + n * t)


# ---- workflow.9: exact changes of log B_21 and of the LOO difference (tau 10 -> 10^4) are -6.907 and -0.0003
WRONG = {
    "workflow.1": [moment_no_const, moment_s_as_var, moment_never_inf, moment_half_k, moment_inverted_power,
                   moment_limit_sd_nan, moment_limit_sd_big],
    "workflow.2": [ps_no_cap, ps_p_over_m1, ps_not_normalised, ps_no_u, ps_m_fifth, ps_raw],
    "workflow.3": [loo_lppd, loo_raw, loo_flip, loo_ddof1, loo_psign],
    "workflow.4": [sbc_random, sbc_fixed_theta, sbc_fresh_truth, sbc_lag, sbc_plus1, sbc_fraction, sbc_above, sbc_l_minus_1],
    "workflow.5": [("U", "decreasing"), ("inverted-U", "increasing"), ("U", "increasing"), "inverted-U", ("flat", "flat")],
    "workflow.6": [ppp_flip, ppp_no_post, ppp_sigma2, ppp_prior, ppp_post_only],
    "workflow.7": [bf_flip, bf_no_det, bf_tau_var, bf_one_obs],
    "workflow.8": [hm_one_minus, hm_no_prior, hm_double, hm_sd],
    "workflow.9": [(6.907, -0.0003),                  # sign of the change reversed
                   (-0.0003, -6.907),                 # the pair in the wrong order
                   (-6.907 / math.log(10), -0.0003),  # a base-10 logarithm
                   (-6.907, 1.0),                     # a LOO change that is not there
                   (-6.8, 0.0)],                      # the chapter's tau 1 -> 1000 instead of 10 -> 10^4
}

test_solution_passes, test_wrong_answer_fails, test_every_checker_has_two_wrong_answers = chapter_tests("workflow", WRONG)


def _sol(name):
    from exercise_harness import solutions
    return solutions("workflow")[name]


def test_direct_multivariate_normal_route_passes(seed):
    "workflow.7: a correct answer through two multivariate normal densities (loses up to 1e-6 nats at tau = 1000) passes."
    from bayesnotes.exercises import check
    res = check("workflow.7", bf_mvn, rng=seed(19))
    assert res.passed, res.message


def test_size_one_arrays_pass_for_numbers(seed):
    "A number returned as an array of size 1 is that number; np.inf as a size-1 array is infinite."
    from bayesnotes.exercises import check
    one = lambda f: (lambda *a: np.array([f(*a)]))
    for ex_id, name in (("workflow.1", "weight_moment"), ("workflow.6", "ppp_mean"), ("workflow.7", "log_bf01"),
                        ("workflow.8", "hm_tail_shape")):
        res = check(ex_id, one(_sol(name)), rng=seed(23))
        assert res.passed, res.message


def test_derive_checkers_do_not_show_the_answer(seed):
    "workflow.1, 6, 7 and 8 ask for a formula: a failure must not print the expected value."
    from bayesnotes.exercises import check
    for ex_id, wrong in (("workflow.1", moment_no_const), ("workflow.1", moment_half_k), ("workflow.6", ppp_no_post),
                         ("workflow.7", bf_no_det), ("workflow.8", hm_one_minus), ("workflow.9", (-6.0, 0.0))):
        res = check(ex_id, wrong, rng=seed(31))
        assert res.status == "failed" and "expected:" not in res.message, res.message


def test_hints_name_the_mistake(seed):
    from bayesnotes.exercises import check
    cases = [("workflow.1", moment_no_const, "constant in front"), ("workflow.2", ps_no_cap, "cap them"),
             ("workflow.3", loo_lppd, "within-sample lppd"), ("workflow.3", loo_ddof1, "ddof = 0"),
             ("workflow.6", ppp_prior, "prior predictive"), ("workflow.7", bf_flip, "log B_10"),
             ("workflow.8", hm_one_minus, "1 - k"), ("workflow.4", sbc_random, "look uniform"),
             ("workflow.1", moment_never_inf, "square root of a negative"), ("workflow.1", moment_limit_sd_nan, "np.inf"),
             ("workflow.4", sbc_above, "not above it"), ("workflow.4", sbc_l_minus_1, "exactly L draws")]
    for ex_id, wrong, text in cases:
        res = check(ex_id, wrong, rng=seed(29))
        assert res.status == "failed" and text in res.message, (ex_id, res.message)
