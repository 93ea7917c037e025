"""The problem set of the MCMC chapter (nbs/exercises/04_mcmc.ipynb): the solutions pass, typical wrong answers fail
(exercise_harness). The wrong answers are written as a student would write them, each with the mistake it makes."""
import numpy as np
from scipy import special, stats

from exercise_harness import chapter_tests


# mcmc.1: the log MH ratio of the multiplicative random walk on sigma
def _log_post(s, y, rate):
    return -len(y) * np.log(s) - np.sum(y ** 2) / (2 * s ** 2) - rate * s

def _ratio_no_hastings(s, s1, y, rate):     # treats sigma' = sigma exp(s xi) as a symmetric proposal in sigma
    return _log_post(s1, y, rate) - _log_post(s, y, rate)

def _ratio_inverted(s, s1, y, rate):        # q(sigma' | sigma) / q(sigma | sigma'): the Jacobian with the wrong sign
    return _log_post(s1, y, rate) - _log_post(s, y, rate) - np.log(s1 / s)

def _ratio_no_normaliser(s, s1, y, rate):   # drops -n log sigma of the likelihood as if it were a constant
    return -np.sum(y ** 2) / (2 * s1 ** 2) + np.sum(y ** 2) / (2 * s ** 2) - rate * (s1 - s) + np.log(s1 / s)

def _ratio_prior_sign(s, s1, y, rate):      # prior exp(+b sigma)
    return _log_post(s1, y, -rate) - _log_post(s, y, -rate) + np.log(s1 / s)

def _ratio_capped(s, s1, y, rate):          # returns log min(1, r), the log acceptance probability
    return min(0.0, _log_post(s1, y, rate) - _log_post(s, y, rate) + np.log(s1 / s))


# mcmc.2: one MH step on a finite space, vectorised over chains
def _mh(log_p, Q, x, rng, hastings=1.0, accept_all=False, reject_to=None):
    prop = np.minimum((np.cumsum(Q[x], axis=1) < rng.random((len(x), 1))).sum(axis=1), len(log_p) - 1)
    with np.errstate(divide="ignore"):
        log_r = log_p[prop] - log_p[x] + hastings * (np.log(Q[prop, x]) - np.log(Q[x, prop]))
    accept = np.log(rng.random(len(x))) < log_r
    if accept_all:
        accept[:] = True
    return np.where(accept, prop, x if reject_to is None else reject_to)

def _mh_metropolis(log_p, Q, x, rng):       # no Hastings factor: the Metropolis rule with an asymmetric proposal
    return _mh(log_p, Q, x, rng, hastings=0.0)

def _mh_inverted(log_p, Q, x, rng):         # Hastings factor q(x' | x) / q(x | x')
    return _mh(log_p, Q, x, rng, hastings=-1.0)

def _mh_accept_all(log_p, Q, x, rng):       # forgets the accept/reject step: the chain follows the proposal
    return _mh(log_p, Q, x, rng, accept_all=True)

def _mh_target_inverted(log_p, Q, x, rng):  # p(x) / p(x') instead of p(x') / p(x)
    return _mh(-log_p, Q, x, rng)

def _mh_reject_to_zero(log_p, Q, x, rng):   # a rejected chain is reset (to state 0) instead of staying
    return _mh(log_p, Q, x, rng, reject_to=0)

def _mh_one_way(log_p, Q, x, rng):          # a proposal that cannot be reversed, q(x | x') = 0, judged as if q were
    prop = np.minimum((np.cumsum(Q[x], axis=1) < rng.random((len(x), 1))).sum(axis=1), len(log_p) - 1)  # symmetric
    back = np.where(Q[prop, x] > 0, Q[prop, x], Q[x, prop])     # "avoid log(0)"
    log_r = log_p[prop] - log_p[x] + np.log(back) - np.log(Q[x, prop])
    return np.where(np.log(rng.random(len(x))) < log_r, prop, x)

def _mh_u_reversed(log_p, Q, x, rng):       # the comparison the wrong way round: accepts when log u > log r
    prop = np.minimum((np.cumsum(Q[x], axis=1) < rng.random((len(x), 1))).sum(axis=1), len(log_p) - 1)
    with np.errstate(divide="ignore"):
        log_r = log_p[prop] - log_p[x] + np.log(Q[prop, x]) - np.log(Q[x, prop])
    return np.where(np.log(rng.random(len(x))) > log_r, prop, x)


# mcmc.3: the first t with TV < 0.01 of the walk with steps -3..3 (exact answer (20, 80))
_WRONG_3 = [
    (370, 370),   # the +-1 walk of the chapter, unchanged
    (80, 20),     # the pair in the wrong order
    (21, 81),     # one step too many (counts the steps from t = 1)
    (19, 79),     # the last t at which the distance is still above 0.01
    (20, 20),     # the middle start's time given for both
    20,           # a single number instead of the pair
]


# mcmc.4: integrated autocorrelation times of the Gibbs sampler
def _iact_rho(r):                           # the x-chain taken as an AR(1) with coefficient rho instead of rho^2
    return (1 + r) / (1 - r), 1 / (1 - r)

def _iact_sum_as_x(r):                      # x + y treated as a rescaled x: the cross-covariances forgotten
    t = (1 + r ** 2) / (1 - r ** 2)
    return t, t

def _iact_sum_ar1(r):                       # x + y taken as an AR(1) with coefficient rho
    return (1 + r ** 2) / (1 - r ** 2), (1 + r) / (1 - r)

def _iact_no_factor2(r):                    # tau = 1 + sum_k rho_k instead of 1 + 2 sum_k rho_k
    return (1 + (1 + r ** 2) / (1 - r ** 2)) / 2, (1 + 1 / (1 - r)) / 2


# mcmc.5: the leapfrog integrator
def _lf_euler(grad, x, p, eps, n, m):       # explicit Euler: both updates from the old point
    for _ in range(n):
        x, p = x + eps * m * p, p + eps * grad(x)
    return x, p

def _lf_full_kick(grad, x, p, eps, n, m):   # one full kick then a drift (symplectic Euler)
    for _ in range(n):
        p = p + eps * grad(x)
        x = x + eps * m * p
    return x, p

def _lf_dkd(grad, x, p, eps, n, m):         # drift-kick-drift instead of kick-drift-kick
    for _ in range(n):
        x = x + 0.5 * eps * m * p
        p = p + eps * grad(x)
        x = x + 0.5 * eps * m * p
    return x, p

def _lf_no_mass(grad, x, p, eps, n, m):     # drifts with p instead of M^-1 p
    for _ in range(n):
        p = p + 0.5 * eps * grad(x)
        x = x + eps * p
        p = p + 0.5 * eps * grad(x)
    return x, p

def _lf_stale_grad(grad, x, p, eps, n, m):  # the second half kick reuses the gradient at the old point
    for _ in range(n):
        g = grad(x)
        p = p + 0.5 * eps * g
        x = x + eps * m * p
        p = p + 0.5 * eps * g
    return x, p


# mcmc.6: the shadow Hamiltonian of leapfrog on the harmonic oscillator
def _shadow_energy(x, p, eps, w):           # the energy H itself
    return 0.5 * p ** 2 + 0.5 * w ** 2 * x ** 2

def _shadow_plus(x, p, eps, w):             # sign error: 1 + (eps w)^2 / 4
    return 0.5 * p ** 2 + 0.5 * w ** 2 * (1 + (eps * w) ** 2 / 4) * x ** 2

def _shadow_dkd(x, p, eps, w):              # what drift-kick-drift conserves (the factor on p^2)
    return 0.5 * (1 - (eps * w) ** 2 / 4) * p ** 2 + 0.5 * w ** 2 * x ** 2

def _shadow_unnormalised(x, p, eps, w):     # conserved, but 2 H~ (not of the requested form)
    return p ** 2 + (1 - (eps * w) ** 2 / 4) * w ** 2 * x ** 2

def _shadow_half(x, p, eps, w):             # 1 - (eps w)^2 / 2
    return 0.5 * p ** 2 + 0.5 * w ** 2 * (1 - (eps * w) ** 2 / 2) * x ** 2


# mcmc.7: the stability limit of leapfrog on correlated_gaussian(0.9, (1, 2)) (exact 0.7923)
_WRONG_7 = [
    0.77,    # a large but bounded energy error taken for an explosion
    0.9,     # the first exploding point of a coarse grid
    4.4,     # 2 sqrt of the largest eigenvalue: the wide direction
    0.396,   # sqrt of the smallest eigenvalue: the limit without the factor 2
    2.0,     # 2 / omega with omega = 1, ignoring the covariance
]


# mcmc.8: rank-normalised split R-hat
def _classic(a, ddof=1):
    n = a.shape[1]
    W = a.var(axis=1, ddof=ddof).mean()
    B = n * a.mean(axis=1).var(ddof=1)
    return np.sqrt(((n - 1) / n * W + B / n) / W)

def _rr(x, split="middle", tail=True, ranks=True, fold="median", method="average", offsets=(0.375, 0.25), ddof=1):
    if split:
        h = x.shape[1] // 2
        s = np.concatenate([x[:, :h], x[:, h:2 * h] if split == "last" else x[:, x.shape[1] - h:]])
    else:
        s = x
    def z(a):
        if not ranks:
            return a
        r = stats.rankdata(a, method=method).reshape(a.shape)
        return special.ndtri((r - offsets[0]) / (a.size + offsets[1]))
    centre = s.mean() if fold == "mean" else np.median(s)
    return float(max([_classic(z(s), ddof)] + ([_classic(z(np.abs(s - centre)), ddof)] if tail else [])))

def _rhat_raw(x):                           # classic split R-hat of the raw draws (no rank normalisation)
    return _rr(x, ranks=False)

def _rhat_unsplit(x):                       # chains not split in halves
    return _rr(x, split=None)

def _rhat_bulk_only(x):                     # forgets the folded (tail) value
    return _rr(x, tail=False)

def _rhat_drop_last(x):                     # odd N: drops the last draw instead of the middle one
    return _rr(x, split="last")

def _rhat_ordinal(x):                       # ties ranked in order of appearance, not averaged
    return _rr(x, method="ordinal")

def _rhat_fold_mean(x):                     # folds at the mean instead of the median
    return _rr(x, fold="mean")

def _rhat_no_blom(x):                       # normal scores of (r - 1/2) / S
    return _rr(x, offsets=(0.5, 0.0))

def _rhat_var_ddof0(x):                     # chain variances with 1/N instead of 1/(N - 1)
    return _rr(x, ddof=0)


# mcmc.9: stationary acceptance rate of the independence sampler N(0, s^2) -> N(0, 1)
def _rate_one_term(s):                      # P(w(Y) > w(X)) only
    return 2 / np.pi * np.arctan(min(s, 1 / s))

def _rate_wide_formula(s):                  # the s > 1 formula used for every s
    return 4 / np.pi * np.arctan(1 / s)

def _rate_narrow_formula(s):                # the s < 1 formula used for every s
    return 4 / np.pi * np.arctan(s)

def _rate_ratio(s):                         # guesses the ratio of the standard deviations
    return min(s, 1 / s)


# mcmc.10: one SGLD step
def _sgld(theta, y, h, n, s0, rng, scale=True, prior_scaled=False, noise=None, full=False, replace=True,
          shared=False, drift=0.5, low=0, high=None, n_data=None):
    N, C = len(y), len(theta)
    high = N if high is None else high
    if full:
        idx, n = np.tile(np.arange(N), (C, 1)), N
    elif shared:
        idx = np.tile(rng.integers(N, size=n), (C, 1))
    elif replace:
        idx = rng.integers(low, high, size=(C, n))
    else:
        idx = np.argsort(rng.random((C, N)), axis=1)[:, :n]
    g_prior = -theta / s0 ** 2 * (N / n if prior_scaled else 1.0)
    g_lik = ((N if n_data is None else n_data) / n if scale else 1.0) * np.sum(y[idx] - theta[:, None], axis=1)
    sd = np.sqrt(h) if noise is None else noise(h)
    return theta + drift * h * (g_prior + g_lik) + sd * rng.standard_normal(C)

def _sgld_unscaled(t, y, h, n, s0, rng):     # batch sum of likelihood gradients not scaled by N / n
    return _sgld(t, y, h, n, s0, rng, scale=False)

def _sgld_prior_scaled(t, y, h, n, s0, rng):  # the prior gradient scaled by N / n too
    return _sgld(t, y, h, n, s0, rng, prior_scaled=True)

def _sgld_noise_2h(t, y, h, n, s0, rng):     # noise sd sqrt(2h) (the dt-convention of the Langevin diffusion)
    return _sgld(t, y, h, n, s0, rng, noise=lambda h: np.sqrt(2 * h))

def _sgld_full_batch(t, y, h, n, s0, rng):   # the exact gradient: no minibatch at all
    return _sgld(t, y, h, n, s0, rng, full=True)

def _sgld_no_replacement(t, y, h, n, s0, rng):  # indices drawn without replacement
    return _sgld(t, y, h, n, s0, rng, replace=False)

def _sgld_shared_batch(t, y, h, n, s0, rng):  # one minibatch shared by all chains
    return _sgld(t, y, h, n, s0, rng, shared=True)

def _sgld_full_drift(t, y, h, n, s0, rng):   # drift h g instead of h g / 2
    return _sgld(t, y, h, n, s0, rng, drift=1.0)

def _sgld_noise_h(t, y, h, n, s0, rng):      # noise sd h instead of sqrt(h)
    return _sgld(t, y, h, n, s0, rng, noise=lambda h: h)

def _sgld_skip_first(t, y, h, n, s0, rng):   # 1-based thinking: indices rng.integers(1, N), y[0] never drawn
    return _sgld(t, y, h, n, s0, rng, low=1)

def _sgld_skip_last(t, y, h, n, s0, rng):    # rng.integers(0, N - 1) read as inclusive: y[N - 1] never drawn
    return _sgld(t, y, h, n, s0, rng, high=len(y) - 1)

def _sgld_scale_n_minus_1(t, y, h, n, s0, rng):  # the batch sum scaled by (N - 1) / n
    return _sgld(t, y, h, n, s0, rng, n_data=len(y) - 1)


# mcmc.11: the non-centred density
def _nc(logp_c, J, jacobian=1.0, tau=np.exp, extra=0.0):
    def logp_nc(x):
        mu, lam, eta = x[0], x[1], np.asarray(x[2:])
        return logp_c(np.concatenate([[mu, lam], mu + tau(lam) * eta])) + jacobian * J * lam + extra * lam
    return logp_nc

def _nc_no_jacobian(logp_c, J):             # forgets the Jacobian e^(J lambda)
    return _nc(logp_c, J, jacobian=0.0)

def _nc_jacobian_sign(logp_c, J):           # -J lambda: the Jacobian of the inverse map
    return _nc(logp_c, J, jacobian=-1.0)

def _nc_tau_is_lambda(logp_c, J):           # theta = mu + lambda eta
    return _nc(logp_c, J, tau=lambda lam: lam)

def _nc_extra_tau_jacobian(logp_c, J):      # adds the Jacobian of tau = e^lambda a second time
    return _nc(logp_c, J, extra=1.0)

def _nc_eta_as_theta(logp_c, J):            # evaluates the centred density at eta itself
    return lambda x: logp_c(x)


WRONG = {
    "mcmc.1": [_ratio_no_hastings, _ratio_inverted, _ratio_no_normaliser, _ratio_prior_sign, _ratio_capped],
    "mcmc.2": [_mh_metropolis, _mh_inverted, _mh_accept_all, _mh_target_inverted, _mh_reject_to_zero,
               _mh_u_reversed, _mh_one_way],
    "mcmc.3": _WRONG_3,
    "mcmc.4": [_iact_rho, _iact_sum_as_x, _iact_sum_ar1, _iact_no_factor2],
    "mcmc.5": [_lf_euler, _lf_full_kick, _lf_dkd, _lf_no_mass, _lf_stale_grad],
    "mcmc.6": [_shadow_energy, _shadow_plus, _shadow_dkd, _shadow_unnormalised, _shadow_half],
    "mcmc.7": _WRONG_7,
    "mcmc.8": [_rhat_raw, _rhat_unsplit, _rhat_bulk_only, _rhat_drop_last, _rhat_ordinal, _rhat_fold_mean,
               _rhat_no_blom, _rhat_var_ddof0],
    "mcmc.9": [_rate_one_term, _rate_wide_formula, _rate_narrow_formula, _rate_ratio],
    "mcmc.10": [_sgld_unscaled, _sgld_prior_scaled, _sgld_noise_2h, _sgld_full_batch, _sgld_no_replacement,
                _sgld_shared_batch, _sgld_full_drift, _sgld_noise_h, _sgld_skip_first, _sgld_skip_last,
                _sgld_scale_n_minus_1],
    "mcmc.11": [_nc_no_jacobian, _nc_jacobian_sign, _nc_tau_is_lambda, _nc_extra_tau_jacobian, _nc_eta_as_theta],
}

test_solution_passes, test_wrong_answer_fails, test_every_checker_has_two_wrong_answers = chapter_tests("mcmc", WRONG)


def test_mcmc_5_accepts_an_array_pair(seed):
    "A correct leapfrog that returns np.array([x, p]), shape (2, d), passes (any sequence of two arrays is a pair)."
    from bayesnotes.exercises import check
    from exercise_harness import solutions
    lf = solutions("mcmc")["leapfrog"]
    res = check("mcmc.5", lambda *a: np.array(lf(*a)), rng=seed(17))
    assert res.passed, res.message


def test_mcmc_7_hint_does_not_tell_the_side():
    "Wrong step sizes below and above the limit get the same hint (a side-specific hint would allow bisection)."
    from bayesnotes.exercises import check
    msgs = {check("mcmc.7", v).message.split("hint:")[1] for v in (0.5, 0.77, 0.81, 0.9, 1.2)}
    assert len(msgs) == 1, msgs


def test_mcmc_2_one_way_hint(seed):
    "The chains that accept one-way proposals fail on the cycle with the hint that names the mistake."
    from bayesnotes.exercises import check
    res = check("mcmc.2", _mh_one_way, rng=seed(17))
    assert res.status == "failed" and "cannot be reversed" in res.message, res.message
