"""The problem set of the EP chapter (nbs/exercises/02_ep.ipynb): the solutions pass, typical wrong answers fail
(exercise_harness). The wrong answers are written as a student would write them, each with the mistake it makes."""
import math

import numpy as np
from scipy import special, stats

from bayesnotes.ep import gamma_from_mean_log, tilted_moments
from exercise_harness import chapter_tests, raises


# ep.1: the Gamma projection of an inverse gamma
def _mean_var_match(a, b):           # matches mean and variance instead of E[gamma] and E[log gamma]: shape a - 2
    m, v = b / (a - 1), b**2 / ((a - 1) ** 2 * (a - 2))
    return m**2 / v, m / v

def _sign_log(a, b):                 # E[log gamma] = log b + digamma(a) (the Gamma's, with the wrong sign): no root
    return gamma_from_mean_log(b / (a - 1), np.log(b) + special.digamma(a))

def _rate_inverted(a, b):            # right shape, rate from E[gamma] = rate / shape
    A, _ = gamma_from_mean_log(b / (a - 1), np.log(b) - special.digamma(a))
    return A, A * b / (a - 1)


# ep.2: tilted moments of the noisy step site
def _step_no_eps(y, mu, v, eps):     # the noise-free step whatever eps
    sd = np.sqrt(v); z = y * mu / sd
    r = np.exp(stats.norm.logpdf(z) - special.log_ndtr(z))
    return special.log_ndtr(z), mu + y * sd * r, v - v * r * (z + r)

def _step_missing_r2(y, mu, v, eps):  # variance from differentiating phi(z) only (the r^2 term of Z' forgotten)
    sd = np.sqrt(v); z = y * mu / sd
    Z = eps + (1 - 2 * eps) * special.ndtr(z); r = (1 - 2 * eps) * stats.norm.pdf(z) / Z
    return np.log(Z), mu + y * sd * r, v - v * r * z

def _step_sd_for_var(y, mu, v, eps):  # the mean shift uses v where it should use sqrt(v)
    sd = np.sqrt(v); z = y * mu / sd
    Z = eps + (1 - 2 * eps) * special.ndtr(z); r = (1 - 2 * eps) * stats.norm.pdf(z) / Z
    return np.log(Z), mu + y * v * r, v - v * r * (z + r)


# ep.3: exact draws from the probit tilted distribution
def _cavity_draws(y, mu, v, n, rng):             # no tilt at all
    return mu + np.sqrt(v) * rng.standard_normal(n)

def _projection_draws(y, mu, v, n, rng):         # the Gaussian with the tilted moments (right mean and variance)
    _, m, s2 = tilted_moments(y, mu, v)
    return m + np.sqrt(s2) * rng.standard_normal(n)

def _rejection_sign(y, mu, v, n, rng):           # accepts with Phi(-y s): the other label
    out = np.empty(0)
    while out.size < n:
        s = mu + np.sqrt(v) * rng.standard_normal(4 * n)
        out = np.r_[out, s[rng.uniform(size=s.size) < special.ndtr(-y * s)]]
    return out[:n]

def _rejection_squared(y, mu, v, n, rng):        # tilts twice: Phi(y s)^2
    out = np.empty(0)
    while out.size < n:
        s = mu + np.sqrt(v) * rng.standard_normal(8 * n)
        out = np.r_[out, s[rng.uniform(size=s.size) < special.ndtr(y * s) ** 2]]
    return out[:n]

def _sir(y, mu, v, n, rng, m_factor=1):          # sampling-importance-resampling: cavity draws weighted by Phi(y s)
    s = mu + np.sqrt(v) * rng.standard_normal(m_factor * n)
    w = special.ndtr(y * s)
    return rng.choice(s, size=n, p=w / w.sum())  # with replacement: neither exact nor independent

def _independence_chain(y, mu, v, n, rng):        # Metropolis with the cavity as proposal: a Markov chain
    prop = (mu + np.sqrt(v) * rng.standard_normal(n)).tolist()
    logu = np.log(rng.uniform(size=n)).tolist()
    lphi = special.log_ndtr(y * np.asarray(prop)).tolist()
    out, cur, lcur = [], prop[0], lphi[0]
    for t in range(n):
        if logu[t] < lphi[t] - lcur:
            cur, lcur = prop[t], lphi[t]
        out.append(cur)
    return np.array(out)


# ep.4: ADF on the clutter problem
def _adf(x, w, a, b, between=True, plus_one=True, order=None):
    m, v, lz = 0.0, b, 0.0
    for xi in (x if order is None else x[order]):
        s2 = v + 1 if plus_one else v
        li = np.log1p(-w) + stats.norm.logpdf(xi, m, np.sqrt(s2)); lo = np.log(w) + stats.norm.logpdf(xi, 0, np.sqrt(a))
        l = np.logaddexp(li, lo); r = np.exp(li - l); k = v / (v + 1)
        m, v = m + r * k * (xi - m), v - r * k * v + (r * (1 - r) * k**2 * (xi - m) ** 2 if between else 0)
        lz += l
    return m, v, lz


# ep.5: the cavity of a full Gaussian
def _cavity_added(mean, cov, x, tau, nu):        # multiplies by the site instead of dividing
    P = np.linalg.inv(cov) + tau * np.outer(x, x); C = np.linalg.inv(P)
    return C @ (np.linalg.solve(cov, mean) + nu * x), C

def _cavity_same_mean(mean, cov, x, tau, nu):    # the covariance is right, the mean is left where it was
    Sx = cov @ x
    return mean, cov + tau / (1 - tau * (x @ Sx)) * np.outer(Sx, Sx)

def _cavity_sm_sign(mean, cov, x, tau, nu):      # Sherman-Morrison with 1 + tau v in the denominator
    Sx = cov @ x; den = 1 + tau * (x @ Sx)
    return mean + (tau * (x @ mean) - nu) / den * Sx, cov + tau / den * np.outer(Sx, Sx)


# ep.6: an EP site update for Laplace noise
def _tilted_closed(x, b, m, v):
    "log Z, mean, variance of Laplace(x | theta, b) N(theta | m, v) / Z (two truncated Gaussians, as in the solutions)."
    sd = np.sqrt(v); mp, mm = m - v / b, m + v / b
    lp = (x - m) / b + v / (2 * b * b) + special.log_ndtr((mp - x) / sd)
    lm = (m - x) / b + v / (2 * b * b) + special.log_ndtr((x - mm) / sd)
    tp, tm = stats.truncnorm((x - mp) / sd, np.inf, mp, sd), stats.truncnorm(-np.inf, (x - mm) / sd, mm, sd)
    wp = np.exp(lp - np.logaddexp(lp, lm))
    mean = wp * tp.mean() + (1 - wp) * tm.mean()
    var = wp * (tp.var() + (tp.mean() - mean) ** 2) + (1 - wp) * (tm.var() + (tm.mean() - mean) ** 2)
    return np.logaddexp(lp, lm) - np.log(2 * b), mean, var

def _laplace_projection(x, b, t, nu, mean, var):   # returns the projection's natural parameters, not the site
    tc, nc = 1 / var - t, mean / var - nu
    lz, m, s2 = _tilted_closed(x, b, nc / tc, 1 / tc)
    return 1 / s2, m / s2, lz

def _laplace_tilts_q(x, b, t, nu, mean, var):     # tilts q instead of the cavity (the old site is never removed)
    lz, m, s2 = _tilted_closed(x, b, mean, var)
    return 1 / s2 - 1 / var, m / s2 - mean / var, lz

def _laplace_no_norm(x, b, t, nu, mean, var):     # log Z without the 1/(2b) of the Laplace density
    tc, nc = 1 / var - t, mean / var - nu
    lz, m, s2 = _tilted_closed(x, b, nc / tc, 1 / tc)
    return 1 / s2 - tc, m / s2 - nc, lz + np.log(2 * b)

def _laplace_coarse(x, b, t, nu, mean, var):      # a trapezoid rule on 201 points that steps over the kink
    tc, nc = 1 / var - t, mean / var - nu
    mc, vc = nc / tc, 1 / tc
    s = np.linspace(mc - 8 * np.sqrt(vc), mc + 8 * np.sqrt(vc), 201)
    f = np.exp(-abs(x - s) / b) / (2 * b) * stats.norm.pdf(s, mc, np.sqrt(vc))
    Z = np.trapezoid(f, s); m = np.trapezoid(s * f, s) / Z; s2 = np.trapezoid((s - m) ** 2 * f, s) / Z
    return 1 / s2 - tc, m / s2 - nc, np.log(Z)

WRONG = {
    "ep.1": [
        _mean_var_match,
        lambda a, b: (a, b),                     # the parameters of 1/gamma, which is Gamma(a, b)
        raises(_sign_log),                       # the equation has no root: the student's function raises
        _rate_inverted,
    ],
    "ep.2": [
        lambda y, mu, v, eps: tilted_moments(y, mu, v),   # the probit site's moments (1 + v)
        _step_no_eps,
        _step_missing_r2,
        _step_sd_for_var,
    ],
    "ep.3": [_cavity_draws, _projection_draws, _rejection_sign, _rejection_squared,
             _sir, lambda y, mu, v, n, rng: _sir(y, mu, v, n, rng, m_factor=5), _independence_chain],
    "ep.4": [
        lambda x, w, a, b: _adf(x, w, a, b, between=False),  # mixture variance without the between-component term
        lambda x, w, a, b: _adf(x, w, a, b, plus_one=False), # inlier predictive N(m, v) instead of N(m, v + 1)
        lambda x, w, a, b: _adf(x, w, a, b, order=slice(None, None, -1)),   # processes the data backwards
        lambda x, w, a, b: _adf(x, w, a, b)[:2] + (0.0,),    # forgets to accumulate log Z
    ],
    "ep.5": [_cavity_added, _cavity_same_mean, _cavity_sm_sign],
    "ep.6": [_laplace_projection, _laplace_tilts_q, _laplace_no_norm, _laplace_coarse],
    "ep.7": [1.0, 0.945, 1.889, 0.794],          # the 1/k rule; 100 -> 1000 passes; natural log; var(theta_1) only
    "ep.8": [1.0, 0.9, 0.5, 0.1, 0.75],          # undamped; unconverged; converges but not the largest; off the grid
    "ep.9": [],
    "ep.10": [],
}

# ep.9: moments of a leaky ReLU
def _leaky(mean, var, c, c2=None, sd_out=False, neg_sign=1.0):
    sd = np.sqrt(var); al = mean / sd
    P, Q, phi = special.ndtr(al), special.ndtr(-al), stats.norm.pdf(al)
    Ez = mean * P + sd * phi + neg_sign * c * (mean * Q - sd * phi)
    Ez2 = (mean**2 + var) * P + mean * sd * phi + (c * c if c2 is None else c2) * ((mean**2 + var) * Q - mean * sd * phi)
    return Ez, np.sqrt(Ez2 - Ez**2) if sd_out else Ez2 - Ez**2

WRONG["ep.9"] = [
    lambda m, v, c: _leaky(m, v, 0.0),           # the ReLU of PBP: the negative branch dropped
    lambda m, v, c: _leaky(m, v, c, c2=c),       # (c a)^2 written c a^2
    lambda m, v, c: _leaky(m, v, c, sd_out=True),  # returns the standard deviation
    lambda m, v, c: _leaky(m, v, c, neg_sign=-1.0),  # E[a; a < 0] taken as a positive quantity
]

# ep.10: TrueSkill, a drawn game
def _draw(m1, v1, m2, v2, beta, eps, noise=None, sign2=-1.0, share=True):
    mu, v = m1 - m2, v1 + v2
    sig = np.sqrt(v + (2 * beta**2 if noise is None else noise))
    a, b = (eps - mu) / sig, (-eps - mu) / sig
    Z = special.ndtr(a) - special.ndtr(b); pa, pb = stats.norm.pdf(a), stats.norm.pdf(b)
    d1 = (pb - pa) / (sig * Z); d2 = (b * pb - a * pa) / (sig**2 * Z) - d1**2
    dm, dv = v * d1, -(v**2) * d2                 # change of the mean of delta, shrinkage of its variance
    k1, k2 = (v1 / v, v2 / v) if share else (1.0, 1.0)
    return m1 + k1 * dm, v1 - k1**2 * dv, m2 + sign2 * k2 * dm, v2 - k2**2 * dv, np.log(Z)

def _draw_as_win(m1, v1, m2, v2, beta, eps):     # the update after a win of player 1 (the chapter's eq. 2)
    c = np.sqrt(2) * beta; mu, v = m1 - m2, v1 + v2
    lz, mh, vh = tilted_moments(1.0, mu / c, v / c**2)
    mh, vh = c * mh, c * c * vh
    return m1 + v1 / v * (mh - mu), v1 - (v1 / v) ** 2 * (v - vh), m2 - v2 / v * (mh - mu), v2 - (v2 / v) ** 2 * (v - vh), lz

WRONG["ep.10"] = [
    _draw_as_win,
    lambda *a: _draw(*a, noise=0.0),             # no performance noise
    lambda *a: _draw(*a, noise=a[4] ** 2),       # one performance's noise only
    lambda *a: _draw(*a, sign2=1.0),             # player 2 moves the same way as player 1
    lambda *a: _draw(*a, share=False),           # both skills take the whole change of delta
]

test_solution_passes, test_wrong_answer_fails, test_every_checker_has_two_wrong_answers = chapter_tests("ep", WRONG)


# correct answers that the checkers once rejected
def _leaky_in_place(mean, var, c):               # correct, but computes alpha in the caller's array
    sd = np.sqrt(var)
    al = mean; al /= sd                          # mean now holds alpha
    m = al * sd
    P, Q, phi = special.ndtr(al), special.ndtr(-al), stats.norm.pdf(al)
    Ez = m * P + sd * phi + c * (m * Q - sd * phi)
    Ez2 = (m**2 + var) * P + m * sd * phi + c * c * ((m**2 + var) * Q - m * sd * phi)
    return Ez, Ez2 - Ez**2

def _step_in_place(y, mu, v, eps):               # correct, but overwrites v with its square root and mu with z
    v_in = v.copy()
    sd = np.sqrt(v, out=v); z = mu; z *= y / sd
    Z = eps + (1 - 2 * eps) * special.ndtr(z); r = (1 - 2 * eps) * stats.norm.pdf(z) / Z
    return np.log(Z), z * sd * y + y * sd * r, v_in - v_in * r * (z + r)


def test_answers_that_modify_their_inputs_pass(seed):
    from bayesnotes.exercises import check
    for ex_id, answer in (("ep.9", _leaky_in_place), ("ep.2", _step_in_place)):
        res = check(ex_id, answer, rng=seed(5))
        assert res.passed, res.message


def test_draw_update_passes_at_many_seeds(seed):
    "ep.10 once failed or crashed on correct answers far in the tails; the solution must pass at 50 seeds in a row (a 10000-seed sweep is in the report of the fix)."
    from bayesnotes.exercises import check
    from exercise_harness import solutions
    draw_update = solutions("ep")["draw_update"]
    bad = [k for k in range(50) if not check("ep.10", draw_update, rng=seed(1000 + k)).passed]
    assert not bad, f"ep.10: the solution fails at seed(1000 + k) for k in {bad}"
