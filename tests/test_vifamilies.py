"""Tests for bayesnotes.vifamilies (richer variational families: low-rank Gaussians and normalising flows).

Exact identities (densities, entropies, square roots, Jacobian determinants, gradients) are compared with scipy and
autograd to floating-point tolerance. Statistical checks take their seeds from the `seed` fixture; each bound is a
multiple of a Monte Carlo (or Polyak-Juditsky) standard error with its false-alarm probability stated beside it.
"""
import numpy as np
import pytest
from scipy import linalg, stats

import autograd
import autograd.numpy as anp

from bayesnotes.core import kl_gauss
from bayesnotes.targets import gaussian_target
from bayesnotes.vi import FullRankGaussian, MeanFieldGaussian, advi, elbo
from bayesnotes.vifamilies import (CouplingFlow, LowRankGaussian, PlanarFlow, fit_flow, flow_banana,
                                   gaussian_kl_optimum, grid_density, regression_example)
from bayesnotes.vifamilies import _banana_fits, _dense_cov


def random_lowrank(d, r, rng, scale=1.0):
    return LowRankGaussian(d, r, scale * rng.standard_normal(LowRankGaussian(d, r).n_params))


# ---------------------------------------------------------------- low rank plus diagonal: exact identities
@pytest.mark.parametrize("d,r", [(1, 1), (4, 1), (7, 3), (6, 6)])
def test_lowrank_density_entropy_and_square_root_exact(d, r, seed):
    rng = np.random.default_rng(seed(0))
    q = random_lowrank(d, r, rng)
    B, c = np.asarray(q.factor), np.exp(q.log_diag)
    assert np.all(np.triu(B, 1) == 0)
    S = B @ B.T + np.diag(c**2)
    assert np.allclose(q.cov, S) and np.allclose(q.scale, np.sqrt(np.diag(S)))
    ref = stats.multivariate_normal(q.mean, S)
    z = rng.standard_normal((9, d)) * 2
    assert np.allclose(q.log_prob(z), ref.logpdf(z), atol=1e-10, rtol=1e-12)
    assert np.allclose(q.log_prob(z[0]), ref.logpdf(z[0]), atol=1e-10)               # a single point, shape (d,)
    assert np.isclose(q.entropy(), ref.entropy(), atol=1e-10)
    A = np.asarray(q.transform(np.eye(d)) - q.mean).T                                 # the square root of eq. (5)
    assert np.allclose(A @ A.T, S, atol=1e-10)
    again = LowRankGaussian.from_factors(q.mean, B, c)
    assert np.allclose(again.params, q.params)
    assert np.array_equal(q.sample(5, rng=seed(1)), q.sample(5, rng=seed(1)))          # reproducible


@pytest.mark.parametrize("d,r", [(3, 1), (6, 2), (5, 5)])
def test_lowrank_gradients_against_autograd(d, r, seed):
    rng = np.random.default_rng(seed(0))
    q = random_lowrank(d, r, rng)
    eps, g = rng.standard_normal((5, d)), rng.standard_normal((5, d))
    rows = [autograd.grad(lambda p: anp.dot(g[s], q.with_params(p).transform(eps[s:s + 1])[0]))(q.params)
            for s in range(5)]
    assert np.allclose(q.path_grad(eps, g), rows, atol=1e-10)
    assert np.allclose(q.entropy_grad(), autograd.grad(lambda p: q.with_params(p).entropy())(q.params), atol=1e-10)
    Z = np.asarray(q.transform(eps))
    zg = np.array([autograd.grad(lambda x: q.log_prob(x))(Z[s]) for s in range(5)])
    assert np.allclose(q.z_grad(eps), zg, atol=1e-9)
    sc = np.array([autograd.grad(lambda p: q.with_params(p).log_prob(Z[s]))(q.params) for s in range(5)])
    assert np.allclose(q.score(Z), sc, atol=1e-9)


def test_lowrank_bad_input():
    with pytest.raises(ValueError, match="rank"):
        LowRankGaussian(3, 4)
    with pytest.raises(ValueError, match="rank"):
        LowRankGaussian(3, 0)
    with pytest.raises(ValueError, match="dim"):
        LowRankGaussian(0)
    with pytest.raises(ValueError, match="params"):
        LowRankGaussian(3, 1, np.zeros(5))
    with pytest.raises(ValueError, match="params"):
        LowRankGaussian(2, 1, [0, 0, 0, np.nan, 0, 0])
    with pytest.raises(ValueError, match="B"):
        LowRankGaussian.from_factors(np.zeros(3), np.ones((3, 2)), 1.0)                  # nonzero above the diagonal
    with pytest.raises(ValueError, match="c"):
        LowRankGaussian.from_factors(np.zeros(3), np.ones((3, 1)), [1.0, -1.0, 1.0])
    with pytest.raises(ValueError, match="z"):
        LowRankGaussian(3).log_prob(np.zeros((2, 4)))
    with pytest.raises(ValueError, match="cov"):
        gaussian_kl_optimum(np.zeros(2), [[1.0, 2.0], [2.0, 1.0]], LowRankGaussian(2))
    with pytest.raises(ValueError, match="mean"):
        gaussian_kl_optimum(np.zeros(3), np.eye(2), LowRankGaussian(2))


# ---------------------------------------------------------------- closed-form optima for a Gaussian target
def test_gaussian_kl_optimum_closed_forms():
    t = regression_example()
    d, P = t.dim, np.linalg.inv(t.cov)
    mf = gaussian_kl_optimum(t.mean, t.cov, MeanFieldGaussian(d))
    assert np.allclose(mf.q.mean, t.mean, atol=1e-6)
    assert np.allclose(np.diag(mf.q.cov), 1 / np.diag(P), rtol=1e-5)                # conditional variances
    # the closed-form KL at the mean-field optimum: 0.5 (sum log(S_ii P_ii)... ) computed independently by kl_gauss
    assert np.isclose(mf.kl, kl_gauss(t.mean, np.diag(1 / np.diag(P)), t.mean, t.cov), atol=1e-8)
    fr = gaussian_kl_optimum(t.mean, t.cov, FullRankGaussian(d))
    assert fr.kl < 1e-8 and np.allclose(fr.q.cov, t.cov, atol=1e-5)
    kls = [gaussian_kl_optimum(t.mean, t.cov, LowRankGaussian(d, r)).kl for r in (1, 2, 4)]
    assert mf.kl > kls[0] > kls[1] > kls[2] > 0                                        # nested families


def test_lowrank_optimum_is_a_factor_target_itself():
    rng = np.random.default_rng(7)                                          # defines the target (not a statistical seed)
    B = np.tril(rng.standard_normal((6, 2))); c = np.exp(0.3 * rng.standard_normal(6))
    m = rng.standard_normal(6)
    opt = gaussian_kl_optimum(m, B @ B.T + np.diag(c**2), LowRankGaussian(6, 2))
    assert opt.kl < 1e-8 and np.allclose(opt.q.cov, B @ B.T + np.diag(c**2), atol=1e-5)
    assert np.allclose(np.asarray(_dense_cov(opt.q)), opt.q.cov)


def _kl_of_params(family, m_star, S_star):
    "Closed-form KL(q || N(m_star, S_star)) as an autograd function of the family's parameters."
    P, c = np.linalg.inv(S_star), np.linalg.slogdet(2 * np.pi * S_star)[1]
    def f(params):
        q = family.with_params(params)
        r = q.mean - m_star
        return 0.5 * (anp.sum(P * _dense_cov(q)) + anp.dot(r, anp.dot(P, r)) + c) - q.entropy()
    return f


# Tolerance: 6.9 Polyak-Juditsky standard errors per parameter, as in test_vi.py (5.3 se is a two-sided 1.2e-7
# per parameter; 19 parameters: < 3e-6 per test; times 1.3 for the finite-run approximation of the asymptotic
# standard error). Measured over seeds 0-3 the largest |z| of the 19 parameters was 2.4. A wrong entropy gradient
# or transform moves the optimum by many standard errors. (On an ill-conditioned factor target, with a nearly
# singular top block of B, 3000 steps are not enough to converge: z-scores reached 11 there.)
def test_lowrank_advi_recovers_a_factor_gaussian_target(seed):
    d, r = 5, 2                                       # a well-conditioned factor target (B of full column rank)
    B = np.array([[1.5, 0.0], [1.0, 1.2], [0.5, -1.0], [-1.0, 0.5], [0.8, 0.8]])
    c, m = np.array([0.5, 0.7, 0.6, 0.4, 0.8]), np.array([1.0, -1.0, 0.5, 0.0, 2.0])
    S = B @ B.T + np.diag(c**2)
    t = gaussian_target(m, S)
    res = advi(t, family=LowRankGaussian(d, r), n_iter=3000, tol_rel_obj=None, rng=seed(0))   # n_mc=10, lr 0.1 decaying
    Bf = np.asarray(res.q.factor)
    signs = np.sign(np.diag(Bf[:r]))                                        # column signs are not identified
    q_opt = LowRankGaussian.from_factors(m, B * signs * np.sign(np.diag(B[:r])), c)
    H = autograd.hessian(_kl_of_params(q_opt, m, S))(q_opt.params)          # Hessian of -ELBO at the optimum
    eps = np.random.default_rng(seed(1)).standard_normal((100000, d))
    G = q_opt.path_grad(eps, t.value_and_grad_batch(np.asarray(q_opt.transform(eps)))[1]) + q_opt.entropy_grad()
    Hi = np.linalg.inv(H)
    n_avg = 3000 - 3000 // 2
    se = np.sqrt(np.diag(Hi @ np.cov(G.T) @ Hi.T) / (10 * n_avg))
    assert np.all(np.abs(res.q.params - q_opt.params) < 6.9 * se)
    assert np.allclose(res.q.cov, S, atol=0.05 * S.max())


# ---------------------------------------------------------------- flows: exact identities
@pytest.mark.parametrize("make", [lambda: PlanarFlow(2, 5), lambda: PlanarFlow(4, 3),
                                  lambda: CouplingFlow(2, 3, width=6), lambda: CouplingFlow(5, 4, width=5)])
def test_flow_log_det_inverse_and_density_exact(make, seed):
    rng = np.random.default_rng(seed(0))
    q0 = make()
    q = q0.with_params(q0.params + 0.8 * rng.standard_normal(q0.n_params))
    eps = rng.standard_normal((6, q.dim))
    z, logdet = q.forward(eps)
    jac = [autograd.jacobian(lambda e: q.forward(e[None])[0][0])(e) for e in eps]
    assert np.allclose(logdet, np.linalg.slogdet(jac)[1], atol=1e-8)
    back, ld = q.inverse(z)
    assert np.allclose(back, eps, atol=1e-8) and np.allclose(ld, logdet, atol=1e-8)
    assert np.allclose(q.log_prob(z), stats.norm.logpdf(eps).sum(1) - logdet, atol=1e-8)
    assert np.array_equal(q.sample(4, rng=seed(1)), q.sample(4, rng=seed(1)))


def test_planar_layers_stay_invertible_for_adversarial_parameters(seed):
    rng = np.random.default_rng(seed(0))
    d = 3
    q = PlanarFlow(d, 1)
    w = rng.standard_normal(d)
    w *= 1.5 / np.linalg.norm(w)
    # raw u^T w = -4.5, far below -1: u_hat^T w = softplus(-4.5) - 1 = -0.989 (more negative raw values round
    # softplus(x) - 1 to exactly -1 in floating point, the boundary of invertibility)
    p = np.concatenate([np.zeros(2 * d), -2 * w, w, [0.3]])
    q = q.with_params(p)
    c = q._prepare(q.params[2 * d:])[3]
    assert np.all(c > -1)
    z = rng.standard_normal((50, d))
    eps, ld = q.inverse(z)
    assert np.allclose(q.forward(eps)[0], z, atol=1e-8) and np.all(np.isfinite(ld))


def test_flow_bad_input():
    with pytest.raises(ValueError, match="dim"):
        PlanarFlow(0)
    with pytest.raises(ValueError, match="dim"):
        CouplingFlow(1)
    with pytest.raises(ValueError, match="width"):
        CouplingFlow(2, width=0)
    with pytest.raises(ValueError, match="n_layers"):
        PlanarFlow(2, 0)
    with pytest.raises(ValueError, match="params"):
        PlanarFlow(2, 2, np.zeros(3))
    with pytest.raises(ValueError, match="params"):
        CouplingFlow(2, 1, np.full(CouplingFlow(2, 1).n_params, np.inf))
    with pytest.raises(ValueError, match="z"):
        PlanarFlow(2).log_prob(np.zeros((3, 3)))
    t = flow_banana()
    with pytest.raises(ValueError, match="q"):
        fit_flow(t, FullRankGaussian(2))
    with pytest.raises(ValueError, match="dimension"):
        fit_flow(t, PlanarFlow(3))
    with pytest.raises(ValueError, match="n_mc"):
        fit_flow(t, PlanarFlow(2), n_mc=0)
    with pytest.raises(ValueError, match="n_iter"):
        fit_flow(t, PlanarFlow(2), n_iter=0)
    with pytest.raises(ValueError, match="q"):
        grid_density(PlanarFlow(3), t)
    with pytest.raises(ValueError, match="xlim"):
        grid_density(PlanarFlow(2), t, xlim=(1.0, 1.0))
    with pytest.raises(ValueError, match="n"):
        grid_density(PlanarFlow(2), t, n=1)


# ---------------------------------------------------------------- flows: fitted to the banana
def test_grid_quadrature_of_a_gaussian_is_exact():
    q = FullRankGaussian.from_moments([0.5, 2.0], [[2.0, 0.6], [0.6, 1.0]])
    p = gaussian_target([0.0, 1.0], [[3.0, -0.5], [-0.5, 2.0]])
    g = grid_density(q, p)
    # Riemann sum of a smooth density with cells of 0.06 x 0.09 (unit-scale sds): error well below 1e-6;
    # the mass outside [-9, 9] x [-6, 20] is below 1e-12
    assert abs(g.mass - 1) < 1e-6
    assert np.isclose(g.kl, kl_gauss(q.mean, q.cov, p.mean, p.cov), atol=1e-5)


def test_flows_beat_the_gaussian_on_the_banana(seed):
    t, fits = _banana_fits(800, seed(0))
    gauss, planar, coupling = fits
    grids = {k: grid_density(q, t) for k, q in fits.items()}
    ests = {k: elbo(t, q, n_mc=4000, rng=seed(1) + i) for i, (k, q) in enumerate(fits.items())}
    for k, g in grids.items():
        # midpoint rule error ~1e-4 for densities smooth on the cell scale; a flow losing 1% of its mass fails
        assert abs(g.mass - 1) < 1e-2, k
        # the target is normalised: ELBO = -KL(q || p). Monte Carlo (4000 draws) against quadrature: 5 se
        # (two-sided 6e-7, 3 comparisons: < 2e-6) plus 2e-3 for the quadrature error of the KL
        assert abs(ests[k].value + g.kl) < 5 * ests[k].stderr + 2e-3, k
    for k in (planar, coupling):
        assert grids[k].kl < grids[gauss].kl
        # flow better than the Gaussian by more than 5 se of the difference of independent estimates:
        # one-sided false alarm < 3e-7 per comparison, 2 comparisons
        assert ests[k].value - ests[gauss].value > 5 * np.hypot(ests[k].stderr, ests[gauss].stderr)
