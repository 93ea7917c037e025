"""The problem set of the SMC chapter (nbs/exercises/05_smc.ipynb): every solution passes its checker and plausible
wrong answers fail, at every seed offset (exercise_harness)."""
import numpy as np
from scipy import stats
from scipy.special import logsumexp

from exercise_harness import chapter_tests


# ---- smc.1: the ESS from log weights ------------------------------------------------------------------------------
def _W(lw):
    return np.exp(lw - logsumexp(lw))

ess_upside_down = lambda lw: np.sum(_W(lw) ** 2)                                   # sum W^2 = 1/ESS (the misprint)
ess_naive = lambda lw: np.sum(np.exp(lw)) ** 2 / np.sum(np.exp(2 * lw))            # right formula, overflows
ess_fraction_of_n = lambda lw: 1 / np.sum(_W(lw) ** 2) / len(lw)                    # ESS / N instead of ESS
ess_unnormalised = lambda lw: 1 / np.sum(np.exp(lw - np.max(lw)) ** 2)             # 1 / sum w^2, w not normalised
ess_perplexity = lambda lw: np.exp(-np.sum(_W(lw)[_W(lw) > 0] * np.log(_W(lw)[_W(lw) > 0])))   # exp(entropy)


# ---- smc.2: systematic resampling ---------------------------------------------------------------------------------
def _invert(W, u):
    cum = np.cumsum(W); cum /= cum[-1]
    return np.searchsorted(cum, u, side="right")

def sys_fixed_uniform(W, M, rng):          # the shared uniform fixed at 1/2: counts are floor/ceil but not unbiased
    return _invert(W, (np.arange(M) + 0.5) / M)

def sys_stratified(W, M, rng):             # one uniform per stratum: stratified, not systematic
    return _invert(W, (np.arange(M) + rng.random(M)) / M)

def sys_multinomial(W, M, rng):            # independent uniforms
    return _invert(W, rng.random(M))

def sys_off_by_one(W, M, rng):             # u_n = (n + v)/M for n = 1..M: the last point can leave [0, 1)
    return np.searchsorted(np.cumsum(W), (np.arange(1, M + 1) + rng.random()) / M, side="right")

def sys_uses_n(W, M, rng):                 # N points instead of M
    return _invert(W, (np.arange(len(W)) + rng.random()) / len(W))

def sys_counts(W, M, rng):                 # offspring counts instead of ancestor indices
    return np.bincount(_invert(W, (np.arange(M) + rng.random()) / M), minlength=len(W))


# ---- smc.3: one Kalman step --------------------------------------------------------------------------------------
def _ks(m, P, y, F, C, Q, R, *, add_q=True, predict=True, sign=-1.0, ll_cov="S"):
    mb, Pb = (F @ m, F @ P @ F.T + (Q if add_q else 0 * Q)) if predict else (m, P)
    S = C @ Pb @ C.T + R
    K = np.linalg.solve(S, C @ Pb).T
    cov = {"S": S, "R": R}[ll_cov]
    return mb + K @ (y - C @ mb), Pb + sign * K @ S @ K.T, stats.multivariate_normal(C @ mb, cov).logpdf(y)

kalman_no_q = lambda *a: _ks(*a, add_q=False)                 # forgets the transition noise
kalman_no_predict = lambda *a: _ks(*a, predict=False)         # updates (m, P) without predicting
kalman_plus = lambda *a: _ks(*a, sign=+1.0)                   # P_t = P_bar + K S K^T
kalman_ll_r = lambda *a: _ks(*a, ll_cov="R")                  # log N(y | C m_bar, R)

def kalman_gain_r(m, P, y, F, C, Q, R):                       # gain with R^{-1} instead of S^{-1}
    mb, Pb = F @ m, F @ P @ F.T + Q
    S = C @ Pb @ C.T + R
    K = Pb @ C.T @ np.linalg.inv(R)
    return mb + K @ (y - C @ mb), Pb - K @ S @ K.T, stats.multivariate_normal(C @ mb, S).logpdf(y)


# ---- smc.4: a bootstrap filter ------------------------------------------------------------------------------------
def _pf(kind):
    def pf(y, a, c, q, r, m0, p0, N, rng):
        if kind == "init":                             # x_0 from N(0, q), the law of one step's noise
            x = np.sqrt(q) * rng.standard_normal(N)
        else:                                          # p0_sd: p0 read as a standard deviation
            x = m0 + (p0 if kind == "p0_sd" else np.sqrt(p0)) * rng.standard_normal(N)
        sd_q = q if kind == "q_sd" else np.sqrt(q)     # q_sd, r_sd: q or r read as a standard deviation
        sd_r = r if kind == "r_sd" else np.sqrt(r)
        log_Z, W = 0.0, None
        for t in range(len(y)):
            if t > 0:
                if kind != "no_resampling":
                    x = x[rng.choice(N, size=N, p=W)]
                x = a * x + sd_q * rng.standard_normal(N)
            elif kind == "move_x0":                    # moves x_0 through the dynamics before weighting it by y_0
                x = a * x + sd_q * rng.standard_normal(N)
            lw = -0.5 * np.log(2 * np.pi * sd_r ** 2) - (y[t] - c * x) ** 2 / (2 * sd_r ** 2)
            lse = np.max(lw) + np.log(np.sum(np.exp(lw - np.max(lw))))
            if kind == "jensen":
                log_Z += np.mean(lw)                   # the average of log weights, not the log of their average
            elif kind == "last_only":
                log_Z = lse - np.log(N)                # keeps only the last step's factor
            else:
                log_Z += lse - (0.0 if kind == "no_1_over_n" else np.log(N))
            W = np.exp(lw - lse)
        return np.exp(log_Z) if kind == "z_not_log" else log_Z
    return pf


# ---- smc.6: the ESS of a bootstrap step ---------------------------------------------------------------------------
def _ess_parts(y, mu, s2, c, r):
    k, d = c * c * s2, y - c * mu
    return np.sqrt(r * (r + 2 * k)) / (r + k), np.exp(-k * d * d / (2 * (k + r) * (k + r / 2)))

ess_inverse = lambda *a: 1 / np.prod(_ess_parts(*a))          # E[G^2] / E[G]^2
ess_relvar = lambda *a: 1 / np.prod(_ess_parts(*a)) - 1       # Var(G) / E[G]^2
ess_no_exp = lambda *a: _ess_parts(*a)[0]                     # drops the exponential factor
ess_s2_as_sd = lambda y, mu, s2, c, r: np.prod(_ess_parts(y, mu, s2 ** 2, c, r))   # s2 read as a standard deviation


# ---- smc.7: the optimal proposal for a displacement sensor --------------------------------------------------------
def disp_position_sensor(xp, yt, a, q, r):     # the chapter's formula, as if y_t measured x_t
    var = q * r / (q + r)
    return (r * a * xp + q * yt) / (q + r), var, stats.norm.logpdf(yt, a * xp, np.sqrt(q + r))

def disp_var_sum(xp, yt, a, q, r):             # variance q + r for the proposal
    return (r * a * xp + q * (yt + xp)) / (q + r), q + r, stats.norm.logpdf(yt, (a - 1) * xp, np.sqrt(q + r))

def disp_weight_q(xp, yt, a, q, r):            # log G with the transition noise only
    return ((r * a * xp + q * (yt + xp)) / (q + r), q * r / (q + r), stats.norm.logpdf(yt, (a - 1) * xp, np.sqrt(q)))

def disp_sign(xp, yt, a, q, r):                # y_t + x_{t-1} taken as y_t - x_{t-1}
    return ((r * a * xp + q * (yt - xp)) / (q + r), q * r / (q + r), stats.norm.logpdf(yt, (a + 1) * xp, np.sqrt(q + r)))


# ---- smc.9: the evidence ratio of a tempering step ----------------------------------------------------------------
def _logZ(lam, y, sigma, tau, *, const=True, spread=True):
    y = np.asarray(y, float); n, ybar = len(y), np.mean(y); S = np.sum((y - ybar) ** 2)
    s2, t2 = sigma ** 2, tau ** 2
    return ((-0.5 * n * lam * np.log(2 * np.pi * s2) if const else 0.0) - (lam * S / (2 * s2) if spread else 0.0)
            - 0.5 * np.log1p(lam * n * t2 / s2) - lam * n * ybar ** 2 / (2 * (s2 + lam * n * t2)))

ratio_under_prior = lambda l0, l1, y, s, t: _logZ(l1 - l0, y, s, t)                   # averages G over the prior
ratio_no_prev = lambda l0, l1, y, s, t: _logZ(l1, y, s, t)                           # log Z_lam, not the ratio
ratio_no_const = lambda l0, l1, y, s, t: _logZ(l1, y, s, t, const=False) - _logZ(l0, y, s, t, const=False)
ratio_no_spread = lambda l0, l1, y, s, t: _logZ(l1, y, s, t, spread=False) - _logZ(l0, y, s, t, spread=False)
ratio_inverted = lambda l0, l1, y, s, t: _logZ(l0, y, s, t) - _logZ(l1, y, s, t)
ratio_naive_mean = lambda l0, l1, y, s, t: (l1 - l0) * np.sum(stats.norm.logpdf(y, np.mean(y), s))   # plug-in theta = ybar


WRONG = {
    "smc.1": [ess_upside_down, ess_naive, ess_fraction_of_n, ess_unnormalised, ess_perplexity],
    "smc.2": [sys_fixed_uniform, sys_stratified, sys_multinomial, sys_off_by_one, sys_uses_n, sys_counts],
    "smc.3": [kalman_no_q, kalman_no_predict, kalman_plus, kalman_ll_r, kalman_gain_r],
    "smc.4": [_pf("jensen"), _pf("init"), _pf("no_resampling"), _pf("no_1_over_n"), _pf("z_not_log"), _pf("last_only"),
              _pf("p0_sd"), _pf("q_sd"), _pf("r_sd"), _pf("move_x0")],
    "smc.5": ["quadratic", "sqrt", "constant", "exponential", "linear in N",
              np.array([0.1, 0.2, 0.4, 0.8])],      # several values (used to raise inside expect_choice: "internal")
    "smc.6": [ess_inverse, ess_relvar, ess_no_exp, ess_s2_as_sd],
    "smc.7": [disp_position_sensor, disp_var_sum, disp_weight_q, disp_sign],
    "smc.8": [(0.958, 0.298), (298.0, 958.0), (0.05, 0.90), (0.30, 1.0), (0.2, 0.958)],
    "smc.9": [ratio_under_prior, ratio_no_prev, ratio_no_const, ratio_no_spread, ratio_inverted, ratio_naive_mean],
}

test_solution_passes, test_wrong_answer_fails, test_every_checker_has_two_wrong_answers = chapter_tests("smc", WRONG)


def _sol(name):
    from exercise_harness import solutions
    return solutions("smc")[name]


def test_size_one_arrays_pass_for_numbers(seed):
    "A number returned as an array of size 1 ([x] or np.array([x])) is that number (review item 11)."
    from bayesnotes.exercises import check
    one = lambda f: (lambda *a: np.array([f(*a)]))
    cases = {"smc.1": one(_sol("ess_log")), "smc.6": one(_sol("ess_fraction")),
             "smc.9": one(_sol("log_evidence_ratio")), "smc.4": one(_sol("bootstrap_log_evidence")),
             "smc.3": lambda *a: (*_sol("kalman_step")(*a)[:2], [_sol("kalman_step")(*a)[2]])}
    for ex_id, f in cases.items():
        res = check(ex_id, f, rng=seed(23))
        assert res.passed, res.message


def test_hints_name_the_mistake(seed):
    from bayesnotes.exercises import check
    res = check("smc.1", ess_unnormalised, rng=seed(29))           # 1 / sum exp(2 (lw - max lw))
    assert res.status == "failed" and "does not normalise" in res.message, res.message
    res = check("smc.4", _pf("jensen"), rng=seed(29))
    assert res.status == "failed" and "average the weights, not their logs" in res.message, res.message


def test_derive_checkers_do_not_show_the_answer(seed):
    "smc.6, smc.7 and smc.9 ask for a formula: a failure must not print the expected value (review item 3)."
    from bayesnotes.exercises import check
    for ex_id, wrong in (("smc.6", ess_inverse), ("smc.6", ess_no_exp), ("smc.7", disp_position_sensor),
                         ("smc.7", disp_var_sum), ("smc.9", ratio_no_const)):
        res = check(ex_id, wrong, rng=seed(31))
        assert res.status == "failed" and "expected:" not in res.message, res.message
    hint6 = check("smc.6", lambda *a: 0.5, rng=seed(31)).message
    assert "c^2 s2 + r" not in hint6 and "c mu" not in hint6.split("hint:")[-1], hint6


def test_case_arrays_are_printed_in_full(seed):
    "The case descriptions print every entry of arrays up to 50 entries, longer ones by size and range (review item 12): no '...'."
    from bayesnotes.exercises import check
    for ex_id, wrong in (("smc.1", ess_upside_down), ("smc.9", ratio_no_const), ("smc.2", sys_multinomial)):
        res = check(ex_id, wrong, rng=seed(37))
        case_line = res.message.splitlines()[1]
        assert res.status == "failed" and "..." not in case_line, case_line


def test_several_values_for_a_choice_fail_cleanly():
    "An array of several values for smc.5 is a 'failed' verdict that names the options, not a checker bug (review item 4)."
    from bayesnotes.exercises import check
    res = check("smc.5", np.array([0.1, 0.2, 0.4, 0.8]))
    assert res.status == "failed" and "single value" in res.message, res.message
