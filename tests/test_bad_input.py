"""Bad input as a new user meets it (issue 32): each case calls a public entry point the way a researcher with a model
of their own gets it wrong, and checks the exception type and that the message names the argument (or the fix).
A case that only warns (a documented warning, the value still returned) is in `WARN`. Every case fails before any long
computation, so the file runs in a few seconds. No outcome is random: the `rng=0` of the table is a fixed seed (most
calls fail before drawing; the state-space cases draw a few values from it first, the same ones every run), and the
tests that draw (`seed` fixture) hold for any draws, as each says why."""
import math
import re
import warnings

import numpy as np
import pytest
import autograd.numpy as anp
from scipy import stats

from bayesnotes.utils import as_rng, blas_threads, spawn_rng
from bayesnotes.targets import Target, as_target, banana, correlated_gaussian, funnel, gaussian_target, logistic_regression
from bayesnotes.diagnostics import (ChainShapeWarning, autocorr, e_bfmi, ess_bulk, ess_mean, ess_tail, mcse_mean,
                                    mcse_quantile, mcse_sd, rhat, summary)
from bayesnotes.mcmc import SamplerWarning, sample
from bayesnotes.mhvariants import independence_mh, metropolis_within_gibbs, mixture_mh
from bayesnotes.vi import advi, laplace
from bayesnotes.vibounds import chivi
from bayesnotes.smc import (LinearGaussianSSM, StateSpaceModel, bootstrap_filter, ibis, resample, smc, systematic,
                            tempered_smc)
from bayesnotes.smcsamplers import smc_abc, waste_free_smc
from bayesnotes.ais import ais
from bayesnotes.montecarlo import importance_sample, mc_estimate
from bayesnotes.decision import (bayes_action, classify_with_reject, credible_interval, expected_loss,
                                 reject_thresholds)
from bayesnotes.core import log_normalize, mvn_sample
from bayesnotes.workflow import khat_threshold, loo, min_draws, normal_mean_posterior, psis, waic


# ---------------------------------------------------------------- the user's own model, right and wrong
def good(z):
    "A proper log density of one point, written with autograd.numpy."
    return -0.5 * anp.sum(z ** 2)

def vector_valued(z):
    "Forgot the sum: returns one term per coordinate, shape (dim,)."
    return -0.5 * z ** 2

def plain_scipy(z):
    "Plain numpy/scipy: evaluates fine, but autograd cannot trace scipy.stats (its ArrayBox error)."
    return stats.norm.logpdf(z).sum()

def no_return(z):
    "Forgot the `return`: the function returns None."
    v = -0.5 * anp.sum(z ** 2)

def math_log(z):
    "math.log of a coordinate: autograd cannot trace it, and at z[0] < 0 plain Python raises 'math domain error'."
    return math.log(z[0]) - 0.5 * anp.sum(z ** 2)

def own_check(z):
    "A density that checks its own parameter (z[1] is a scale) and raises its own ValueError."
    if z[1] < 0:
        raise ValueError("sigma must be positive")
    return -0.5 * anp.sum(z ** 2)

def plain_float(z):
    "A Python float() of a coordinate: fine on numpy, TypeError on autograd's ArrayBox."
    return -0.5 * float(z[0]) ** 2 - 0.5 * anp.sum(z[1:] ** 2)

A3 = np.eye(3)
def needs_three(z):
    "Written for points of length 3: a point of another length fails inside numpy ('shapes not aligned')."
    return -0.5 * anp.dot(z, anp.dot(A3, z))

def log_prior(th): return -0.5 * np.sum(th ** 2, axis=1)          # vectorised (N, d) -> (N,)
def log_lik(th): return -0.5 * np.sum((th - 1.0) ** 2, axis=1)
def prior_sample(rng, N): return rng.standard_normal((N, 1))        # the documented order: (rng, N)
def prior_sample_swapped(N, rng): return rng.standard_normal((N, 1))  # the user's order: (N, rng)
def prior_sample_swapped_seeded(N, rng): return np.random.default_rng(rng).standard_normal((N, 1))
def simulate(rng, th): return th + rng.standard_normal(th.shape)    # SMC-ABC's simulator (rng, theta (N, d)) -> (N, 1)

MVN2 = stats.multivariate_normal(np.zeros(2), np.eye(2))
# each message ends with its fix, and only that fix (the anchors keep a wrong hint appended to a right one from passing)
SCALAR_DENSITY = r"^the log density must return a scalar.*returned an array of shape \(3,\); sum its terms \(anp\.sum\)$"
SCALAR_BATCHED = r"^the log density must return a scalar.*returned an array of shape \(3,\); batched=True does not change that: sum over the last axis, anp\.sum\(\.\.\., axis=-1\)"
BATCH_SHAPE = r"^the log density is declared batched=True, but for a batch of points of shape \(4, [23]\) it returned shape \(\).*axis=-1.*or drop batched=True$"
NO_RETURN = r"^the log density returned None: does it end with `return \.\.\.`\?$"
GRAD_SHAPE = r"^grad must return the gradient at one point x, shape \([23],\), but it returned shape \(\)$"
USE_ANP = r"^autograd cannot differentiate the log density.*import autograd.numpy as anp.*or pass `grad`\. autograd's error: "
WRONG_DIM = r"shape \(2,\) \(dim=2\).*shapes \(3,3\) and \(2,\) not aligned.*`dim`"
SWAPPED = r"prior_sample\(rng, N\).*swap"
SSM = LinearGaussianSSM(A=[[0.9]], C=[[1.0]], Q=[[0.5]], R=[[1.0]], m0=[0.0], P0=[[1.0]])

class TwoD(StateSpaceModel):
    "A 2-d state written without setting the class attribute dim_x (it stays 1)."
    def sample_initial(self, rng, N): return rng.standard_normal((N, 2))
    def sample_transition(self, rng, t, xp): return xp + rng.standard_normal(xp.shape)
    def sample_obs(self, rng, t, x): return x[:, :1] + rng.standard_normal((len(x), 1))

class Col(StateSpaceModel):
    "log_obs returns a column (N, 1) instead of one value per particle (N,)."
    def sample_initial(self, rng, N): return rng.standard_normal((N, 1))
    def sample_transition(self, rng, t, xp): return xp + rng.standard_normal(xp.shape)
    def log_obs(self, t, x, yt): return -0.5 * (yt - x) ** 2

X20 = np.random.default_rng(0).standard_normal((20, 3))
def one_point_only(b):
    "A density of one point (3,) (X20 @ b), declared batched=True: a batch (n, 3) fails in numpy's dot."
    return -0.5 * anp.sum(anp.dot(X20, b) ** 2)

# (call, exception type, regex the message must match: the argument's name and, for the issue's cases, the fix)
BAD = [
    # --- issue 32's cases: a vector-valued density (was numpy's "only 0-dimensional arrays can be converted")
    (lambda: sample("nuts", vector_valued, x0=np.zeros(3), n_warmup=5, n_draws=5, n_chains=1, rng=0), ValueError, SCALAR_DENSITY),
    (lambda: sample("rwmh", vector_valued, x0=np.zeros(3), n_warmup=5, n_draws=5, n_chains=1, rng=0), ValueError, SCALAR_DENSITY),
    (lambda: Target(vector_valued, 3).value_and_grad(np.zeros(3)), ValueError, SCALAR_DENSITY),
    (lambda: Target(vector_valued, 3).logdensity(np.zeros(3)), ValueError, SCALAR_DENSITY),
    (lambda: Target(vector_valued, 3).hessian(np.zeros(3)), ValueError, SCALAR_DENSITY),
    # the same density declared batched=True: still the scalar message (never autograd's), and never "pass batched=True"
    (lambda: Target(vector_valued, 3, batched=True).value_and_grad(np.zeros(3)), ValueError, SCALAR_BATCHED),
    (lambda: Target(vector_valued, 3, batched=True).logdensity(np.zeros(3)), ValueError, SCALAR_BATCHED),
    (lambda: Target(vector_valued, 3, batched=True).value_and_grad_batch(np.zeros((4, 3))), ValueError,
     r"^the log density is declared batched=True.*\(4, 3\) it returned shape \(4, 3\), not one value per row \(4,\)"),
    # a density of one point declared batched=True (anp.sum without axis=-1): one number for the whole batch
    (lambda: Target(good, 3, batched=True).value_and_grad_batch(np.zeros((4, 3))), ValueError, BATCH_SHAPE),
    (lambda: Target(good, 3, batched=True).logdensity_batch(np.zeros((4, 3))), ValueError, BATCH_SHAPE),
    (lambda: sample("rwmh", Target(good, 2, batched=True), x0=np.zeros(2), n_warmup=5, n_draws=5, n_chains=4, rng=0),
     ValueError, BATCH_SHAPE),
    (lambda: sample("nuts", Target(good, 2, batched=True), x0=np.zeros(2), n_warmup=5, n_draws=5, n_chains=4, rng=0),
     ValueError, BATCH_SHAPE),
    (lambda: advi(Target(good, 2, batched=True), n_iter=2, rng=0), ValueError, r"^the log density is declared batched=True.*returned shape \(\)"),
    # a user gradient of the wrong shape
    (lambda: Target(good, 3, grad=lambda x: 1.0).value_and_grad(np.zeros(3)), ValueError, GRAD_SHAPE),
    (lambda: sample("mala", Target(good, 2, grad=lambda x: -np.sum(x)), x0=np.zeros(2), n_warmup=5, n_draws=5, n_chains=1,
                    rng=0), ValueError, GRAD_SHAPE),
    # a forgotten return (was NaN from logdensity, and the autograd hint from value_and_grad)
    (lambda: Target(no_return, 2).logdensity(np.zeros(2)), ValueError, NO_RETURN),
    (lambda: Target(no_return, 2).value_and_grad(np.zeros(2)), ValueError, NO_RETURN),
    (lambda: Target(no_return, 2).check_point(np.zeros(2)), ValueError, NO_RETURN),
    (lambda: sample("nuts", no_return, x0=np.zeros(2), n_warmup=5, n_draws=5, n_chains=1, rng=0), ValueError, NO_RETURN),
    (lambda: laplace(no_return, np.zeros(2)), ValueError, NO_RETURN),
    # math.log: the autograd hint at any point, never the dimension hint; the density's own errors come through as they are
    (lambda: Target(math_log, 2).value_and_grad([1.0, 0.0]), TypeError, USE_ANP),
    (lambda: Target(math_log, 2).value_and_grad([-1.0, 0.0]), TypeError, USE_ANP),
    (lambda: Target(math_log, 2).logdensity([-1.0, 0.0]), ValueError, r"^math domain error$"),
    (lambda: Target(own_check, 2).logdensity([0.0, -1.0]), ValueError, r"^sigma must be positive$"),
    (lambda: Target(own_check, 2).value_and_grad([0.0, -1.0]), ValueError, r"^sigma must be positive$"),
    (lambda: advi(vector_valued, dim=3, n_iter=2, rng=0), ValueError, SCALAR_DENSITY),
    (lambda: laplace(vector_valued, np.zeros(3)), ValueError, SCALAR_DENSITY),
    # --- a plain numpy/scipy density autograd cannot differentiate (was autograd's ArrayBox error, no hint)
    (lambda: sample("nuts", plain_scipy, x0=np.zeros(2), n_warmup=5, n_draws=5, n_chains=1, rng=0), TypeError, USE_ANP),
    (lambda: sample("mala", plain_float, x0=np.zeros(2), n_warmup=5, n_draws=5, n_chains=1, rng=0), TypeError, USE_ANP),
    (lambda: Target(plain_scipy, 2).value_and_grad(np.zeros(2)), TypeError, USE_ANP),
    (lambda: Target(plain_scipy, 2).hessian(np.zeros(2)), TypeError, USE_ANP),
    (lambda: advi(plain_scipy, dim=2, n_iter=2, rng=0), TypeError, USE_ANP),
    (lambda: laplace(plain_float, np.zeros(2)), TypeError, USE_ANP),
    # --- a wrong dim (was numpy's "shapes not aligned" with no word of dim)
    (lambda: advi(needs_three, dim=2, n_iter=2, rng=0), ValueError, WRONG_DIM),
    (lambda: laplace(needs_three, np.zeros(2)), ValueError, WRONG_DIM),
    (lambda: Target(needs_three, 2).value_and_grad(np.zeros(2)), ValueError, WRONG_DIM),
    (lambda: sample("nuts", needs_three, x0=np.zeros(2), n_warmup=5, n_draws=5, n_chains=1, rng=0), ValueError, WRONG_DIM),
    (lambda: Target(good, 3).value_and_grad(np.zeros(2)), ValueError, r"x must have shape \(3,\), got \(2,\)"),
    (lambda: advi(correlated_gaussian(), dim=3, n_iter=2), ValueError, r"^target has dimension 2, but dim=3 was asked for$"),
    (lambda: chivi(correlated_gaussian(), dim=3, n_iter=2), ValueError, r"^target has dimension 2, but dim=3 was asked for$"),
    (lambda: laplace(correlated_gaussian(), np.zeros(3)), ValueError, r"^target has dimension 2, but x0 has dimension 3$"),
    (lambda: laplace(good, np.zeros(0)), ValueError, r"^x0 must have an integer dimension >= 1 \(at least one coordinate\), got 0$"),
    # --- independence MH with a proposal of the wrong dimension (was a reshape error)
    (lambda: independence_mh(good, MVN2, dim=3, n_draws=5, rng=0), ValueError, r"proposal draws points of dimension 2.*target has dimension 3"),
    (lambda: independence_mh(good, MVN2, dim=3, x0=np.zeros(3), n_draws=5, rng=0), ValueError, r"proposal.*dimension 2.*dimension 3"),
    (lambda: mixture_mh(good, stats.norm(), dim=2, n_draws=5, rng=0), ValueError, r"proposal.*dimension 1.*dimension 2"),
    # --- prior_sample written (N, rng) instead of (rng, N) (was "'int' object has no attribute 'standard_normal'")
    (lambda: tempered_smc(log_prior, log_lik, prior_sample_swapped, N=50, rng=0), TypeError, SWAPPED),
    (lambda: tempered_smc(log_prior, log_lik, prior_sample_swapped_seeded, N=50, rng=0), TypeError, SWAPPED),
    (lambda: waste_free_smc(log_prior, log_lik, prior_sample_swapped, N=50, rng=0), TypeError, SWAPPED),
    (lambda: ais(log_prior, log_lik, prior_sample_swapped, 50, n_temps=3, rng=0), TypeError, SWAPPED),
    (lambda: smc_abc(simulate, 0.5, log_prior, prior_sample_swapped, 50, 0.1, rng=0), TypeError, SWAPPED),
    (lambda: ibis(log_prior, lambda th, yb: -0.5 * np.sum((th - yb[0]) ** 2, axis=1), prior_sample_swapped, np.zeros(3), N=50,
                  rng=0), TypeError, SWAPPED),
    # --- negative costs (classify_with_reject(reject_cost=-1) rejected everything, silently)
    (lambda: classify_with_reject([[0.6, 0.4]], reject_cost=-1), ValueError, r"reject_cost must be a non-negative"),
    (lambda: classify_with_reject([[0.6, 0.4]], reject_cost=[0.1, 0.2]), ValueError, r"reject_cost must have shape \(\)"),
    (lambda: reject_thresholds(1.0, 1.0, -0.1), ValueError, r"reject_cost must be non-negative"),
    (lambda: reject_thresholds(0.0, 1.0, 0.1), ValueError, r"c_fn must be positive"),
    # --- sample: the driver's own checks
    (lambda: sample("nutz", good, x0=np.zeros(2)), ValueError, r"kernel"),
    (lambda: sample("nuts", good), ValueError, r"x0.*required"),
    (lambda: sample("nuts", good, x0=[0.0, np.nan]), ValueError, r"x0 must be finite"),
    (lambda: sample("nuts", good, x0=np.zeros((3, 2)), n_chains=4), ValueError, r"x0.*shape \(2,\) or \(4, 2\)"),
    (lambda: sample("nuts", good, x0=np.zeros(2), n_chains=0), ValueError, r"n_chains must be an integer >= 1"),
    (lambda: sample("nuts", good, x0=np.zeros(2), n_draws=2.5), ValueError, r"n_draws must be an integer"),
    (lambda: sample("nuts", good, x0=np.zeros(2), step_size=-1.0), ValueError, r"step_size must be positive"),
    (lambda: sample("nuts", good, x0=np.zeros(2), inv_mass=[1.0, 1.0, 1.0]), ValueError, r"inv_mass.*shape"),
    (lambda: sample("nuts", good, x0=np.zeros(2), target_accept=1.5), ValueError, r"target_accept must lie in"),
    (lambda: sample("nuts", good, x0=np.zeros(2), rng="seed"), ValueError, r"rng must be None"),
    (lambda: sample("nuts", lambda z: anp.log(z[0]) + anp.sum(z), x0=[-1.0, 0.0], n_chains=1), ValueError, r"x0.*not finite.*support"),
    # --- Target and its conversion
    (lambda: Target("not a function", 2), ValueError, r"logdensity must be callable"),
    (lambda: Target(good, 0), ValueError, r"dim must be an integer >= 1"),
    (lambda: Target(good, 2, mean=[0.0, 0.0, 0.0]), ValueError, r"mean must have shape \(2,\)"),
    (lambda: Target(one_point_only, 3, batched=True).value_and_grad_batch(np.zeros((4, 3))), ValueError,
     r"works on one point.*drop batched=True"),
    (lambda: as_target(good), ValueError, r"dim is required"),
    (lambda: as_target(3.0, 2), ValueError, r"target must be a Target or a callable"),
    (lambda: gaussian_target(cov=[[1.0, 2.0], [2.0, 1.0]]), ValueError, r"cov must be positive definite"),
    (lambda: correlated_gaussian(rho=1.5), ValueError, r"rho"),
    (lambda: funnel(dim=1), ValueError, r"dim"),
    (lambda: banana(b=np.nan), ValueError, r"b must be finite"),
    (lambda: logistic_regression(np.ones((3, 2)), [0, 1]), ValueError, r"y"),
    # --- vi
    (lambda: advi(good, n_iter=2), ValueError, r"dim is required"),
    (lambda: advi(good, dim=2, gradient="pathwise", n_iter=2), ValueError, r"gradient must be 'reparam', 'stl' or 'score'"),
    (lambda: advi(good, dim=2, n_mc=0, n_iter=2), ValueError, r"n_mc must be an integer"),
    (lambda: advi(good, dim=2, family="diagonal", n_iter=2), ValueError, r"family"),
    (lambda: laplace(good, np.zeros((2, 2))), ValueError, r"x0 must be 1-d"),
    (lambda: laplace(lambda z: anp.sum(z), np.zeros(2)), ValueError, r"not a strict maximum"),   # improper: no mode
    # --- Metropolis-Hastings variants
    (lambda: independence_mh(good, "normal", dim=2), ValueError, r"proposal must be a scipy.stats frozen distribution"),
    (lambda: mixture_mh(good, MVN2, dim=2, weight=1.5), ValueError, r"weight must lie in \[0, 1\]"),
    (lambda: mixture_mh(good, MVN2, dim=2, scale=0.0), ValueError, r"scale must be positive"),
    (lambda: metropolis_within_gibbs(good, blocks=[[0], [0]], dim=2), ValueError, r"blocks must partition"),
    # --- diagnostics
    (lambda: rhat(np.ones((4, 3))), ValueError, r"`x` needs at least 1 chain and 4 draws"),
    (lambda: rhat([[1.0, 2.0, np.nan, 4.0, 5.0]]), ValueError, r"`x` contains NaN"),
    (lambda: rhat("abc"), ValueError, r"`x` must be a numeric array"),
    (lambda: ess_bulk(3.0), ValueError, r"`x` must be shaped \(chain, draw\)"),
    (lambda: mcse_quantile(np.zeros((2, 10)), 1.5), ValueError, r"prob must lie in \(0, 1\)"),
    (lambda: summary(np.random.default_rng(0).normal(size=(2, 10, 2)), names=["a"]), ValueError, r"`names` has 1 entries"),
    (lambda: autocorr(np.zeros((2, 10)), max_lag=10), ValueError, r"`max_lag` must be in \[0, 9\]"),
    (lambda: e_bfmi(np.zeros((2, 10, 2))), ValueError, r"`energy` must be shaped"),
    # --- SMC: samplers, filters, resampling
    (lambda: tempered_smc(log_prior, log_lik, prior_sample, N=1, rng=0), ValueError, r"N must be an integer >= 2"),
    (lambda: tempered_smc(log_prior, log_lik, prior_sample, N=50, ess_target=1.5, rng=0), ValueError, r"ess_target must lie in"),
    (lambda: tempered_smc("log_prior", log_lik, prior_sample, N=50, rng=0), ValueError, r"log_prior must be callable"),
    (lambda: tempered_smc(log_prior, log_lik, lambda rng, N: rng.standard_normal(N - 1), N=50, rng=0), ValueError,
     r"prior_sample\(rng, N\) must return an array of shape \(N, d\)"),
    (lambda: tempered_smc(log_prior, log_lik, prior_sample, N=50, resampling="sys", rng=0), ValueError, r"resampling must be one of"),
    (lambda: waste_free_smc(log_prior, log_lik, prior_sample, N=50, P=0, rng=0), ValueError, r"P must be an integer"),
    (lambda: resample([0.5, 0.6]), ValueError, r"W must sum to one"),
    (lambda: resample([0.5, 0.5], scheme="stratify"), ValueError, r"scheme must be one of"),
    (lambda: systematic([0.5, -0.5, 1.0]), ValueError, r"W must be non-negative"),
    (lambda: systematic([0.5, 0.5], M=0), ValueError, r"M must be an integer >= 1"),
    # --- the prior and likelihood of the particle samplers given as Targets (densities of one point, as for NUTS)
    (lambda: tempered_smc(Target(good, 2), log_lik, prior_sample, N=50, rng=0), ValueError,
     r"^log_prior is a Target of dimension 2, but the particles \(drawn by prior_sample\) have dimension 1.*dim=1"),
    (lambda: tempered_smc(log_prior, Target(good, 3), prior_sample, N=50, rng=0), ValueError,
     r"^log_lik is a Target of dimension 3, but the particles"),
    (lambda: waste_free_smc(log_prior, Target(good, 2), prior_sample, N=50, rng=0), ValueError, r"^log_lik is a Target of dimension 2"),
    (lambda: ais(Target(good, 2), log_lik, prior_sample, N=50, n_temps=3, rng=0), ValueError, r"^log_prior is a Target of dimension 2"),
    (lambda: smc_abc(simulate, 0.5, Target(good, 2), prior_sample, 50, 0.1, rng=0), ValueError, r"^log_prior is a Target of dimension 2"),
    (lambda: ibis(Target(good, 2), lambda th, yb: -0.5 * np.sum((th - yb[0]) ** 2, axis=1), prior_sample, np.zeros(3), N=50,
                  rng=0), ValueError, r"^log_prior is a Target of dimension 2"),
    (lambda: ibis(log_prior, Target(good, 1), prior_sample, np.zeros(3), N=50, rng=0), ValueError,
     r"^log_lik of ibis must be a function \(theta \(N, d\), y \(n, \.\.\.\)\) -> \(N,\), not a Target"),
    (lambda: ais(log_prior, 3.0, prior_sample, N=50, rng=0), ValueError, r"^log_lik must be callable \(a vectorised log density.*or a Target"),
    (lambda: systematic([0.5, 0.5], 2, M=2), TypeError, r"systematic\(\) got 'M' by position and by keyword: pass M= only"),
    (lambda: resample([0.5, 0.5], "systematic", 0, 2, 3), TypeError, r"resample\(\) takes M= and rng= by keyword"),
    (lambda: bootstrap_filter(SSM, np.zeros((5, 2)), N=10, rng=0), ValueError, r"y must have shape \(T, 1\)"),
    (lambda: bootstrap_filter(SSM, [0.0, np.nan], N=10, rng=0), ValueError, r"y must be finite"),
    (lambda: bootstrap_filter(SSM, np.zeros(5), N=0, rng=0), ValueError, r"N must be an integer >= 1"),
    (lambda: bootstrap_filter(SSM, np.zeros(5), N=10, ess_threshold=2.0, rng=0), ValueError, r"ess_threshold must lie in"),
    (lambda: smc(object(), 10, rng=0), ValueError, r"model must define a method M0"),
    (lambda: TwoD().simulate(5, rng=0), ValueError, r"sample_initial.*shape \(1, 2\).*dim_x"),
    (lambda: bootstrap_filter(Col(), np.zeros(5), N=50, rng=0), ValueError,
     r"Col\.log_obs must return one value per particle.*\(50, 1\)"),
    (lambda: LinearGaussianSSM(A=[[0.9]], C=[[1.0]], Q=[[-0.5]], R=[[1.0]], m0=[0.0], P0=[[1.0]]), ValueError, r"Q"),
    # --- Monte Carlo and core helpers a user's own code calls
    (lambda: importance_sample(lambda x: -x ** 2, "proposal", n=10), ValueError, r"proposal must be a scipy.stats"),
    (lambda: mc_estimate([1.0]), ValueError, r"values"),
    (lambda: log_normalize([np.nan, 0.0]), ValueError, r"logw"),
    (lambda: mvn_sample([0.0, 0.0], [[1.0, 0.0], [0.0, -1.0]], 3, rng=0), ValueError, r"cov"),
    # --- decision helpers on the predictions
    (lambda: classify_with_reject([[0.5, 0.6]]), ValueError, r"every row of probs must sum to 1"),
    (lambda: classify_with_reject(np.array([0.2, 0.7])), ValueError, r"probs must have shape \(n, C\), got \(2,\)"),
    (lambda: classify_with_reject([[0.5, 0.5]], np.eye(3)), ValueError, r"cost_matrix must be a finite \(2, 2\) array"),
    (lambda: expected_loss([1.0, 2.0], [0.0], "huber"), ValueError, r"loss must be 'squared', 'absolute'"),
    (lambda: expected_loss([1.0, 2.0], [0.0], weights=[1.0, -1.0]), ValueError, r"weights must be non-negative"),
    (lambda: bayes_action([1.0, 2.0]), ValueError, r"actions is required"),
    (lambda: credible_interval([1.0, 2.0], 1.5), ValueError, r"alpha"),
    # --- PSIS and LOO (chapter 9): a log likelihood of -inf (an observation impossible under a draw), too few draws
    (lambda: loo(np.r_[[[-np.inf, 0.0]], np.zeros((40, 2))]), ValueError, r"^loglik must be finite: it has 1 -inf"),
    (lambda: waic(np.r_[[[-np.inf, 0.0]], np.zeros((40, 2))]), ValueError, r"^loglik must be finite: it has 1 -inf"),
    (lambda: khat_threshold(5), ValueError, r"^n_draws must be an integer >= 21"),
    (lambda: min_draws(np.nan), ValueError, r"^khat must not be NaN"),
    (lambda: psis(np.zeros(10)), ValueError, r"^log_weights has 10 draws; psis needs at least 21"),
    (lambda: normal_mean_posterior([1.0, 2.0], sigma=-1.0), ValueError, r"^sigma must be positive"),
    (lambda: normal_mean_posterior([1.0, 2.0], prior_sd=0.0), ValueError, r"^prior_sd must be positive"),
    # --- randomness and threads (utils): the conventions every entry point shares
    (lambda: as_rng(-1), ValueError, r"rng must be None, a non-negative int seed"),
    (lambda: as_rng(1.5), ValueError, r"rng must be None"),
    (lambda: spawn_rng(0, -1), ValueError, r"k must be an integer >= 0"),
    (lambda: blas_threads(0), ValueError, r"n must be an integer >= 1"),
    # --- review 00a/00b: a point or a batch of the wrong dimension was a silent number; gaussian_target ignored dim
    (lambda: Target(good, 3).logdensity(np.ones(5)), ValueError, r"^x must have shape \(3,\), got \(5,\)"),
    (lambda: Target(good, 3).logdensity(np.ones((4, 3))), ValueError, r"^x must have shape \(3,\), got \(4, 3\); for a batch"),
    (lambda: Target(good, 3).value_and_grad(np.ones((1, 3))), ValueError, r"^x must have shape \(3,\), got \(1, 3\)"),
    (lambda: Target(good, 3).value_and_grad(np.ones((3, 1))), ValueError, r"^x must have shape \(3,\), got \(3, 1\)"),
    (lambda: Target(good, 3).hessian(np.ones((1, 3))), ValueError, r"^x must have shape \(3,\), got \(1, 3\)"),
    (lambda: correlated_gaussian().logdensity(np.ones((4, 2))), ValueError, r"^x must have shape \(2,\), got \(4, 2\); for a batch"),
    (lambda: Target(good, 3, batched=True).value_and_grad_batch(np.ones((4, 6))), ValueError, r"^X must have shape \(\.\.\., 3\)"),
    (lambda: Target(good, 3, batched=True).logdensity_batch(np.ones((4, 2))), ValueError, r"^X must have shape \(\.\.\., 3\)"),
    (lambda: Target(good, 3).logdensity_batch(np.ones((3, 2))), ValueError, r"^X must have shape \(\.\.\., 3\) \(points in rows\), got \(3, 2\)"),
    (lambda: correlated_gaussian().value_and_grad_batch(np.ones((4, 6))), ValueError, r"^X must have shape \(\.\.\., 2\)"),
    (lambda: gaussian_target(sd=[1.0, 2.0], dim=3), ValueError, r"^dim=3 disagrees with sd, which gives dimension 2"),
    (lambda: gaussian_target(cov=np.eye(2), dim=3), ValueError, r"^dim=3 disagrees with cov"),
    (lambda: gaussian_target(cov=[1.0, 2.0]), ValueError, r"^cov must be a number or a matrix \(dim, dim\).*give sd"),
    (lambda: gaussian_target(sd=1.0, dim=0), ValueError, r"^dim must be an integer >= 1"),
    (lambda: gaussian_target(mean=np.zeros(2), sd=1.0, dim=3), ValueError, r"^mean must have shape \(3,\)"),
    # --- review 00b item 16: Target's and the standard targets' arguments (were accepted, or numpy's errors)
    (lambda: Target(good, 3, grad=5), ValueError, r"^grad must be callable"),
    (lambda: Target(good, 3, batched="no"), ValueError, r"^batched must be True or False"),
    (lambda: Target(good, 3, mean=[np.nan, 0, 0]), ValueError, r"^mean must be finite"),
    (lambda: Target(good, 2, cov=-np.eye(2)), ValueError, r"^cov must have a non-negative diagonal"),
    (lambda: Target(good, 2, cov=[[1.0, 0.5], [0.0, 1.0]]), ValueError, r"^cov must be symmetric"),
    (lambda: funnel(scale=40), ValueError, r"^scale must be below 37\.7"),
    (lambda: banana(b=[0.1, 0.2]), ValueError, r"^b must have shape \(\)"),
    (lambda: correlated_gaussian("high"), ValueError, r"^rho must be a number"),
    (lambda: correlated_gaussian(np.array([0.5, 0.2])), ValueError, r"^rho must have shape \(\)"),
]


def _entry(call):
    "The public function a case calls (the first bayesnotes name in its code): for the count of entry points."
    names = [n for n in call.__code__.co_names if not n.startswith("_")]
    return next((n for n in names if n in globals() and getattr(globals()[n], "__module__", "").startswith("bayesnotes")), names[0])


def test_the_table_spans_the_issue():
    "At least 60 cases over at least 25 public entry points (issue 32, 'What to build' item 3)."
    entries = {_entry(c) for c, _, _ in BAD}
    assert len(BAD) >= 60 and len(entries) >= 25, (len(BAD), sorted(entries))


@pytest.mark.parametrize("call,exc,match", BAD, ids=[f"{i}-{_entry(c)}" for i, (c, _, _) in enumerate(BAD)])
def test_bad_input_raises_a_clear_error(call, exc, match):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)           # numpy's own warnings on the way are not the point
        warnings.filterwarnings("ignore", "Output seems independent of input")   # autograd, on the linear density
        with pytest.raises(exc, match=match) as info:
            call()
    assert type(info.value) is exc                                # exactly the documented type, not a subclass


def test_a_density_error_keeps_the_original_error_chained():
    "The rewritten errors chain the original (`raise ... from`), so the traceback still shows where the user's code failed."
    with pytest.raises(TypeError, match=USE_ANP) as info:
        Target(plain_scipy, 2).value_and_grad(np.zeros(2))
    cause = info.value.__cause__                                  # autograd's own error, also quoted in the message
    assert isinstance(cause, TypeError) and str(cause) in str(info.value)
    with pytest.raises(TypeError, match=SWAPPED) as info:
        tempered_smc(log_prior, log_lik, prior_sample_swapped, N=50, rng=0)
    assert isinstance(info.value.__cause__, AttributeError)


def test_errors_unrelated_to_autograd_are_left_as_they_are():
    "A density that fails on plain numpy too (here a KeyError) is not blamed on autograd: its own error comes through."
    def broken(z): return {}["missing"]
    with pytest.raises(KeyError):
        Target(broken, 2).value_and_grad(np.zeros(2))
    # and a good density gives its value and gradient as before (the checks run only when an error is on its way)
    v, g = Target(good, 2).value_and_grad(np.array([1.0, 2.0]))
    assert v == -2.5 and np.allclose(g, [-1.0, -2.0])
    assert Target(lambda z: anp.reshape(good(z), (1,)), 2).logdensity(np.ones(2)) == -1.0   # a (1,) value is a scalar


# ---------------------------------------------------------------- documented warnings (the value is still returned)
# a (draw, chain) array (1000, 4) is read as 1000 chains of 4 draws; one chain (draw, dim) (1000, 5) as 1000 chains of 5
LAYOUT = r"shape \(1000, [45]\), read as 1000 chains of [45] draws: more chains than draws.*\(chain, draw\[, dim\]\)"
DRAW_CHAIN, ONE_CHAIN = (1000, 4), (1000, 5)

WARN = [
    (lambda x: rhat(x), DRAW_CHAIN, LAYOUT),
    (lambda x: rhat(x), ONE_CHAIN, LAYOUT),
    (lambda x: ess_bulk(x), DRAW_CHAIN, LAYOUT),
    (lambda x: ess_tail(x), DRAW_CHAIN, LAYOUT),
    (lambda x: ess_mean(x), DRAW_CHAIN, LAYOUT),
    (lambda x: mcse_mean(x), DRAW_CHAIN, LAYOUT),
    (lambda x: mcse_sd(x), DRAW_CHAIN, LAYOUT),
    (lambda x: mcse_quantile(x, 0.5), DRAW_CHAIN, LAYOUT),
    (lambda x: summary(x), DRAW_CHAIN, r"`draws` has shape \(1000, 4\).*more chains than draws"),
    (lambda x: autocorr(x, 3), DRAW_CHAIN, LAYOUT),
]


@pytest.mark.parametrize("call,shape,match", WARN, ids=[f"{i}-{_entry(c)}" for i, (c, _, _) in enumerate(WARN)])
def test_transposed_draws_warn_once_naming_the_layout(call, shape, match, seed):
    "The warning depends on the shape only (ArviZ's rule: more chains than draws), so any draws of that shape give it."
    x = np.random.default_rng(seed(0)).normal(size=shape)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call(x)
    mine = [w for w in caught if issubclass(w.category, ChainShapeWarning)]
    assert len(mine) == 1, [str(w.message) for w in caught]       # once, even where the function calls others
    assert issubclass(ChainShapeWarning, UserWarning)              # shown by default, as ArviZ's UserWarning
    assert re.search(match, str(mine[0].message)), str(mine[0].message)
    assert mine[0].filename == __file__                           # the warning points at the caller's line


def test_right_layout_does_not_warn(seed):
    "Negative control: the same draws transposed to (chain, draw) give no layout warning."
    x = np.random.default_rng(seed(0)).normal(size=DRAW_CHAIN)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ChainShapeWarning)
        rhat(x.T); ess_bulk(x.T); mcse_mean(x.T); summary(x.T[..., None])
        rhat(np.ones((4, 4)) + np.arange(4))                       # as many chains as draws: no warning either


def test_badly_scaled_target_warns_with_the_count_of_divergences(seed):
    """A target 1000 times narrower than the fixed step size: the leapfrog step is unstable (eps / sd = 1000 > 2), the
    energy error at the first step is of order (eps / sd)^2 >> 1000 whatever the momentum, so every transition after
    warm-up diverges, and `sample` says how many at the end of the run (`SamplerWarning`, as Stan prints it)."""
    narrow = lambda z: -0.5 * anp.sum((z / 1e-3) ** 2)
    with pytest.warns(SamplerWarning, match=r"nuts: 40 of 40 transitions after warm-up were divergent \(per chain: \[20, 20\]\)"):
        res = sample("nuts", narrow, x0=np.full(2, 0.5), n_warmup=5, n_draws=20, n_chains=2, step_size=1.0, adapt=False,
                     rng=seed(0))
    assert res.stats.divergent.all()


def test_improper_target_warns_that_the_step_size_search_failed(seed):
    """An improper target, log p(x) = x_1 + x_2: its gradient is constant, so leapfrog is exact, every proposal is
    accepted and the initial step-size search (double until the acceptance probability falls below 0.8) never
    crosses: `sample` warns that it failed in every chain and that the density may be improper."""
    with warnings.catch_warnings(record=True) as caught:      # (it may diverge too, far out: those counts are random)
        warnings.simplefilter("always")
        sample("nuts", lambda z: anp.sum(z), x0=np.zeros(2), n_warmup=10, n_draws=10, n_chains=2, rng=seed(1))
    said = [str(w.message) for w in caught if issubclass(w.category, SamplerWarning)]
    assert any(re.search(r"step-size search.*failed in chain\(s\) \[0, 1\].*improper", m) for m in said), said
