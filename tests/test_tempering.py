"""Tests of bayesnotes.tempering: parallel tempering against exact answers.

Exact references: the mode weight P(x > 0) of the two-mode mixture (closed form, checked by quadrature); the moments
of a Gaussian target and of its tempered version N(mu, Sigma / beta); the expected swap acceptance between two
Gaussian replicas (`gaussian_swap_acceptance`, checked against direct simulation of S = a U - c V).

Statistical bounds: sampler outputs are compared through independent replicates (the chains of a run, or separate
runs), whose means are approximately normal, so the standardised error has a Student t law with R - 1 degrees of
freedom; each test states its family-wise false-alarm probability (Bonferroni over its comparisons). Seeds come from
the `seed` fixture. Nothing here multiplies matrices larger than 3 x 3, so BLAS threading does not matter."""
import numpy as np
import pytest
from scipy import integrate, stats

from bayesnotes.targets import gaussian_target
from bayesnotes.tempering import (PT_MEANS, PT_SDS, PT_WEIGHTS, exact_right_weight, gaussian_swap_acceptance,
                                  gaussian_swap_limit, geometric_ladder, parallel_tempering, two_mode_mixture)


def _t_bound(alpha, n):
    "Two-sided Student t_{n-1} quantile at level alpha: |t| above it has probability alpha."
    return stats.t.isf(alpha / 2, n - 1)


def _t_stat(values, exact):
    v = np.asarray(values, float)
    return (v.mean(0) - exact) / (v.std(0, ddof=1) / np.sqrt(len(v)))


def test_exact_right_weight_by_quadrature():
    "P(x > 0) = 0.7 Phi(6) + 0.3 Phi(-6) equals the integral of the target's density over (0, inf)."
    t = two_mode_mixture()
    f = lambda x: float(np.exp(t.logdensity_batch(np.array([[x]]))[0]))
    num = integrate.quad(f, 0, 6, epsabs=1e-13)[0] + integrate.quad(f, 6, 40, epsabs=1e-13)[0]
    assert abs(exact_right_weight() - num) < 1e-10
    w = np.array(PT_WEIGHTS) / np.sum(PT_WEIGHTS)
    assert abs(exact_right_weight() - np.sum(w * stats.norm.sf(0, PT_MEANS, PT_SDS))) < 1e-15
    assert abs(integrate.quad(f, -40, 40, points=[-6, 0, 6])[0] - 1) < 1e-10     # the target is normalised


def test_geometric_ladder():
    b = geometric_ladder(6, 0.01)
    assert b[0] == 1.0 and np.isclose(b[-1], 0.01) and np.all(np.diff(b) < 0)
    assert np.allclose(b[1:] / b[:-1], 0.01 ** (1 / 5))
    assert geometric_ladder(1, 0.5).tolist() == [1.0]


def test_gaussian_swap_acceptance_matches_simulation(seed):
    """Quadrature of eq. pt-gauss-exact against 10^6 draws of S = a U - c V, U, V ~ chi2_d. min(1, e^S) lies in [0, 1],
    so its sd is at most 0.5 and the Monte Carlo error at most 5e-4; a bound of 5.5 of those has false-alarm
    probability < 4e-8 per case, < 2e-7 for the 4 cases (CLT for a bounded variable with 10^6 draws)."""
    rng = np.random.default_rng(seed(1))
    n = 10 ** 6
    for r, d in ((0.5, 1), (0.2, 2), (0.6, 5), (0.9, 30)):
        U, V = rng.chisquare(d, n), rng.chisquare(d, n)
        S = 0.5 * (1 - r) * U - 0.5 * (1 / r - 1) * V
        assert abs(np.exp(np.minimum(S, 0)).mean() - gaussian_swap_acceptance(r, d)) < 5.5 * 0.5 / np.sqrt(n), (r, d)


def test_gaussian_swap_limit():
    "Large d with delta sqrt(d) fixed: the exact acceptance tends to 2 Phi(-delta sqrt(d) / 2) (deterministic)."
    for sig in (1.0, 2.38, 4.0):
        lim = 2 * stats.norm.cdf(-sig / 2)
        errs = [abs(gaussian_swap_acceptance(np.exp(-sig / np.sqrt(d)), d) - lim) for d in (10, 100, 2000)]
        assert errs[-1] < 0.005 and errs[-1] < errs[0], (sig, errs)
        assert gaussian_swap_limit(np.exp(-sig / np.sqrt(50)), 50) == pytest.approx(lim, rel=1e-12)
    assert gaussian_swap_acceptance(1.0, 4) == 1.0


def test_gaussian_moments_at_every_temperature(seed):
    """PT on N(mu, diag(sd^2)) in 2-d: the beta = 1 replica has the target's mean and variance, and the hottest replica
    has the variance sd^2 / beta of pi^beta. 10 independent chains; per-chain means of x (2), (x - mu)^2 (2) at
    beta = 1 and (x - mu)^2 (2) at the hottest beta, each against its exact value with Student t_9: 6 comparisons at
    two-sided 1e-4 / 6 each, family-wise false-alarm probability <= 1e-4."""
    mu, sd = np.array([1.0, -2.0]), np.array([1.0, 1.5])
    rng = np.random.default_rng(seed(2))
    betas = geometric_ladder(4, 0.1)
    C = 10
    x0 = mu + sd * rng.standard_normal((C, 2))
    res = parallel_tempering(gaussian_target(mu, sd=sd), x0, betas, 2000, step=1.7, n_chains=C, n_warmup=300,
                             keep_all=True, rng=rng)
    cold, hot = res.states[:, :, 0], res.states[:, :, -1]
    assert np.array_equal(cold, res.draws)
    stats_ = [_t_stat(cold.mean(1), mu), _t_stat(((cold - mu) ** 2).mean(1), sd ** 2),
              _t_stat(((hot - mu) ** 2).mean(1), sd ** 2 / betas[-1])]
    k = _t_bound(1e-4 / 6, C)
    assert np.all(np.abs(np.concatenate(stats_)) < k), (stats_, k)


def test_mode_weight_is_exact(seed):
    """The beta = 1 chains of PT on 0.3 N(-6, 1) + 0.7 N(6, 1) put weight 0.7 on x > 0: per-chain fractions of 10
    independent chains (starts uniform in (-8, 8)), Student t_9 at two-sided 1e-4: false-alarm probability 1e-4."""
    rng = np.random.default_rng(seed(3))
    C = 10
    res = parallel_tempering(two_mode_mixture(), rng.uniform(-8, 8, (C, 1)), geometric_ladder(5, 0.02), 2000,
                             n_chains=C, n_warmup=200, rng=rng)
    frac = (res.draws[..., 0] > 0).mean(1)
    t = _t_stat(frac, exact_right_weight())
    assert abs(t) < _t_bound(1e-4, C), (t, frac)


def test_random_walk_alone_stays_in_its_mode(seed):
    """With the single temperature 1 (plain random-walk Metropolis) chains started at -6 (barrier 16.8 nats) stay in the
    small mode and estimate P(x > 0) far below its 0.7. A chain does cross now and then: 2 of 4000 chains of 3000
    iterations did (rng=123; 95% upper bound on the rate 1.8e-3), and it happened at seed offset 145 of the long sweep,
    so the test does not forbid it. A crossing chain has at most a quarter of the 4 chains' draws, so a pooled fraction
    above 0.35 needs two crossings: probability below 6 (1.8e-3)^2 = 2e-5."""
    res = parallel_tempering(two_mode_mixture(), [-6.0], [1.0], 3000, n_chains=4, n_warmup=0, rng=seed(4))
    assert np.mean(res.draws > 0) < 0.35, np.mean(res.draws > 0, axis=(1, 2))


def test_swap_acceptance_matches_gaussian_exact(seed):
    """Mean swap acceptance per pair on N(0, I_3) with betas (1, 0.5, 0.25) against eq. pt-gauss-exact at ratio 0.5:
    10 independent runs (1 chain each), Student t_9 per pair at two-sided 1e-4 / 2: family-wise false alarm <= 1e-4."""
    d, R = 3, 10
    exact = gaussian_swap_acceptance(0.5, d)
    acc = np.array([parallel_tempering(gaussian_target(np.zeros(d), sd=1.0), np.zeros(d), [1.0, 0.5, 0.25], 2000,
                                       step=2.38 / np.sqrt(d), n_chains=1, n_warmup=300, rng=seed(10 + r)).swap_acceptance
                    for r in range(R)])
    t = _t_stat(acc, exact)
    assert np.all(np.abs(t) < _t_bound(1e-4 / 2, R)), (t, acc.mean(0), exact)


def test_output_shapes_and_cost():
    res = parallel_tempering(two_mode_mixture(), [0.0], [1.0, 0.5, 0.2], 7, n_chains=2, n_warmup=3, rng=0)
    assert res.draws.shape == (2, 7, 1) and res.swap_acceptance.shape == (2,) and res.move_acceptance.shape == (3,)
    assert res.n_evals == 2 * (1 + 3 * 10) and res.states is None and np.allclose(res.betas, [1.0, 0.5, 0.2])
    again = parallel_tempering(two_mode_mixture(), [0.0], [1.0, 0.5, 0.2], 7, n_chains=2, n_warmup=3, rng=0)
    assert np.array_equal(res.draws, again.draws)      # an int seed names a run


@pytest.mark.parametrize("bad, word", [
    (dict(betas=[0.5, 1.0]), "betas"), (dict(betas=[1.0, 0.0]), "betas"), (dict(betas=[1.0, -0.5]), "betas"),
    (dict(betas=[1.0, 0.5, 0.5]), "betas"), (dict(betas=[1.0, np.inf]), "betas"), (dict(betas=[]), "betas"),
    (dict(betas=[[1.0, 0.5]]), "betas"), (dict(n_draws=0), "n_draws"), (dict(n_draws=2.5), "n_draws"),
    (dict(n_warmup=-1), "n_warmup"), (dict(n_chains=0), "n_chains"), (dict(x0=[np.nan]), "x0"),
    (dict(x0=[0.0, 1.0]), "x0"), (dict(x0=np.zeros((3, 1))), "x0"), (dict(step=0.0), "step"),
    (dict(step=[1.0, 1.0, 1.0]), "step"), (dict(rng="seed"), "rng"), (dict(dim=3), "dim")])
def test_bad_input(bad, word):
    kw = dict(target=two_mode_mixture(), x0=[0.0], betas=[1.0, 0.5], n_draws=5, n_chains=2) | bad
    with pytest.raises(ValueError, match=word):
        parallel_tempering(**kw)


def test_start_with_zero_density_is_refused():
    t = gaussian_target(np.zeros(1), sd=1.0)
    logp = lambda x: -0.5 * x[0] ** 2 if x[0] < 1 else -np.inf
    with pytest.raises(ValueError, match="x0"):
        parallel_tempering(logp, [2.0], [1.0, 0.5], 5, dim=1)
    with pytest.raises(ValueError, match="dim"):
        parallel_tempering(logp, [0.0], [1.0, 0.5], 5)          # a plain function needs its dimension
    assert parallel_tempering(t, [0.0], [1.0], 3, rng=1).draws.shape == (4, 3, 1)


@pytest.mark.parametrize("bad", [dict(n_temps=0, beta_min=0.1), dict(n_temps=3, beta_min=0.0),
                                 dict(n_temps=3, beta_min=2.0), dict(n_temps=3, beta_min=1.0),
                                 dict(n_temps=3, beta_min=np.nan)])
def test_bad_ladder(bad):
    with pytest.raises(ValueError, match="n_temps|beta_min"):
        geometric_ladder(**bad)


@pytest.mark.parametrize("bad", [dict(ratio=0.0, dim=2), dict(ratio=1.2, dim=2), dict(ratio=0.5, dim=0)])
def test_bad_swap_acceptance_args(bad):
    with pytest.raises(ValueError, match="ratio|dim"):
        gaussian_swap_acceptance(**bad)


@pytest.mark.parametrize("r, d", [(0.9, 1), (0.5, 1), (0.5, 3), (0.8, 10), (0.3, 2), (0.95, 50)])
def test_gaussian_swap_acceptance_against_the_integral(r, d):
    "The closed form 2 P(F_{d,d} > 1/r) against the one-dimensional integral of @eq-pt-gauss-exact, by quadrature."
    a, c = (1 - r) / 2, (1 / r - 1) / 2
    chi = stats.chi2(d)
    G = stats.gamma(d / 2, scale=2 / (1 + 2 * c))
    f = lambda u: (chi.pdf(u) * chi.cdf(a * u / c)       # the second term in logs: e^(a u) alone overflows
                   + np.exp(chi.logpdf(u) + a * u - d / 2 * np.log1p(2 * c) + G.logsf(a * u / c)))
    quad = integrate.quad(f, 0, np.inf, limit=200, epsabs=1e-12, epsrel=1e-10)[0]
    assert abs(gaussian_swap_acceptance(r, d) - quad) < 1e-7, (gaussian_swap_acceptance(r, d), quad)


def test_step_array_used_as_given():
    "A float step is scaled by 1/sqrt(beta); an array of K steps is not (the same draws as the scaled float)."
    t, b = two_mode_mixture(), np.array([1.0, 0.5, 0.25])
    a = parallel_tempering(t, [6.0], b, 50, n_chains=2, n_warmup=5, step=1.0, rng=3)
    c = parallel_tempering(t, [6.0], b, 50, n_chains=2, n_warmup=5, step=1.0 / np.sqrt(b), rng=3)
    d = parallel_tempering(t, [6.0], b, 50, n_chains=2, n_warmup=5, step=np.ones(3), rng=3)
    assert np.array_equal(a.draws, c.draws) and not np.array_equal(a.draws, d.draws)


def test_more_argument_checks():
    t = two_mode_mixture()
    with pytest.raises(ValueError, match="ratio"):
        gaussian_swap_limit(2.0, 1)
    with pytest.raises(ValueError, match="n_draws"):
        parallel_tempering(t, [0.0], [1.0, 0.5, 0.25, 0.1], 1, n_warmup=1, rng=0)
    res = parallel_tempering(t, np.array([[-6.0], [6.0], [5.0]]), [1.0, 0.5], 4, n_warmup=2, rng=0)
    assert res.draws.shape == (3, 4, 1)                        # n_chains from the rows of x0
    with pytest.raises(ValueError, match="x0|n_chains"):
        parallel_tempering(t, np.zeros((3, 1)), [1.0, 0.5], 4, n_chains=2, rng=0)


def test_warns_when_the_step_is_badly_scaled():
    "A step far too large for the target: almost every move is rejected, and the sampler says so."
    from bayesnotes.mcmc import SamplerWarning
    with pytest.warns(SamplerWarning, match="acceptance"):
        parallel_tempering(two_mode_mixture(), [6.0], [1.0, 0.5], 200, n_warmup=10, step=1e4, rng=0)


# --- Swendsen-Wang (section 6) -------------------------------------------------------------------------------------
# Exact references: the Ising law on a 2 x 3 or 3 x 3 grid by enumeration (64 or 512 states), and the exact one-sweep
# Swendsen-Wang kernel K(x, .) on the 2 x 3 grid, enumerated over the bond configurations (7 edges). Statistical
# comparisons are chi-square tests of counts from independent chains, each failing falsely with probability 1e-4.
import itertools

from bayesnotes.tempering import ising_edges, ising_log_prob, ising_mixing_study, swendsen_wang


def _components(n, pairs):
    "Connected components of n nodes joined by pairs, by union-find (independent of scipy's csgraph)."
    parent = list(range(n))
    def root(i):
        while parent[i] != i: i = parent[i]
        return i
    for i, j in pairs: parent[root(i)] = root(j)
    return [root(i) for i in range(n)]


def _sw_kernel_row(x, shape, J, a):
    "Exact one-sweep Swendsen-Wang law of the next state from x, as {state tuple: probability}."
    n, E = x.size, ising_edges(shape)
    agree = [k for k, (i, j) in enumerate(E) if x[i] == x[j]]
    p, row = 1 - np.exp(-2 * J), {}
    for on in itertools.product([0, 1], repeat=len(agree)):
        pv = np.prod([p if o else 1 - p for o in on])
        lab = _components(n, [E[k] for k, o in zip(agree, on) if o])
        roots = sorted(set(lab))
        A = {r: sum(a[i] for i in range(n) if lab[i] == r) for r in roots}
        for signs in itertools.product([-1., 1.], repeat=len(roots)):
            ps = np.prod([np.exp(s * A[r]) / (2 * np.cosh(A[r])) for s, r in zip(signs, roots)])
            new = tuple(dict(zip(roots, signs))[lab[i]] for i in range(n))
            row[new] = row.get(new, 0.) + pv * ps
    return row


def _chi2_pvalue(observed, expected, min_expected=5.):
    "Chi-square p-value after pooling the cells with expected counts below min_expected into one."
    observed, expected = np.asarray(observed, float), np.asarray(expected, float)
    small = expected < min_expected
    o = np.append(observed[~small], observed[small].sum())
    e = np.append(expected[~small], expected[small].sum())
    keep = e > 0
    return stats.chisquare(o[keep], e[keep]).pvalue


def test_ising_log_prob_gives_the_gibbs_conditional(seed):
    "log pi(x_i = +1, rest) - log pi(x_i = -1, rest) = 2 J (sum of neighbours) + 2 a_i, the conditional Gibbs uses."
    rng = np.random.default_rng(seed(40))
    shape, J = (4, 5), 0.7
    a, x = rng.standard_normal(20), rng.choice([-1., 1.], 20)
    E = ising_edges(shape)
    assert E.shape == (4 * 4 + 3 * 5, 2)
    for i in range(20):
        xp, xm = x.copy(), x.copy(); xp[i], xm[i] = 1., -1.
        eta = sum(x[j] for e in E for k, j in ((0, e[1]), (1, e[0])) if e[k] == i)
        d = ising_log_prob(xp, shape, J, a) - ising_log_prob(xm, shape, J, a)
        assert np.isclose(d, 2 * J * eta + 2 * a[i], rtol=0, atol=1e-12)


def test_exact_kernel_is_reversible_and_leaves_ising_invariant():
    "The enumerated kernel satisfies detailed balance with the Ising law (a check of the derivation the code follows)."
    shape, J = (2, 3), 0.5
    a = np.array([0.3, -0.2, 0.1, 0.0, 0.4, -0.5])
    S = np.array(list(itertools.product([-1., 1.], repeat=6)))
    pi = np.exp(ising_log_prob(S, shape, J, a)); pi /= pi.sum()
    index = {tuple(s): k for k, s in enumerate(S)}
    K = np.zeros((64, 64))
    for k, s in enumerate(S):
        for t, q in _sw_kernel_row(s, shape, J, a).items(): K[k, index[t]] += q
    assert np.allclose(K.sum(1), 1, atol=1e-12)
    F = pi[:, None] * K
    assert np.allclose(F, F.T, atol=1e-14) and np.allclose(pi @ K, pi, atol=1e-14)


@pytest.mark.parametrize("J", [0.3, 0.9])
def test_one_sweep_matches_exact_kernel(seed, J):
    "20000 chains each make one sweep from the same state; their next states follow the exact kernel row (chi-square)."
    shape = (2, 3)
    rng = np.random.default_rng(seed(41))
    a, x = 0.4 * rng.standard_normal(6), rng.choice([-1., 1.], 6)
    row = _sw_kernel_row(x, shape, J, a)
    nxt = swendsen_wang(shape, J, a, n_draws=1, n_chains=20000, rng=seed(42), x0=x)[:, 0]
    S = [tuple(s) for s in itertools.product([-1., 1.], repeat=6)]
    counts = {s: 0 for s in S}
    for s in map(tuple, nxt): counts[s] += 1
    assert all(counts[s] == 0 for s in S if row.get(s, 0.) == 0)       # impossible moves never happen
    assert _chi2_pvalue([counts[s] for s in S], [20000 * row.get(s, 0.) for s in S]) > 1e-4


def test_swendsen_wang_samples_ising_law(seed):
    "After 30 sweeps, 4000 independent chains on the 3 x 3 grid follow the exact law of the magnetisation (J = 0.6)."
    a = 0.3 * np.random.default_rng(seed(43)).standard_normal(9)
    S = np.array(list(itertools.product([-1., 1.], repeat=9)))
    pi = np.exp(ising_log_prob(S, (3, 3), 0.6, a)); pi /= pi.sum()
    final = swendsen_wang((3, 3), 0.6, a, n_draws=30, n_chains=4000, rng=seed(44), x0=-np.ones(9))[:, -1]
    m = np.arange(-9, 10, 2)
    exp_ = [4000 * pi[S.sum(1) == v].sum() for v in m]
    obs = [np.sum(final.sum(1) == v) for v in m]
    assert _chi2_pvalue(obs, exp_) > 1e-4


def test_swendsen_wang_checks_and_reproduces():
    d = swendsen_wang((3, 4), 0.5, n_draws=5, n_chains=3, rng=7)
    assert d.shape == (3, 5, 12) and set(np.unique(d)) <= {-1., 1.}
    assert np.array_equal(d, swendsen_wang((3, 4), 0.5, n_draws=5, n_chains=3, rng=7))
    with pytest.raises(ValueError, match="J"): swendsen_wang((3, 3), 0.)
    with pytest.raises(ValueError, match="J"): swendsen_wang((3, 3), -0.5)
    with pytest.raises(ValueError, match="field"): swendsen_wang((3, 3), 0.5, field=np.zeros(8))
    with pytest.raises(ValueError, match="field"): swendsen_wang((3, 3), 0.5, field=np.full(9, np.nan))
    with pytest.raises(ValueError, match="x0"): swendsen_wang((3, 3), 0.5, x0=np.zeros(9))
    with pytest.raises(ValueError, match="x0"): swendsen_wang((3, 3), 0.5, x0=np.ones(8))
    with pytest.raises(ValueError, match="n_draws"): swendsen_wang((3, 3), 0.5, n_draws=0)
    with pytest.raises(ValueError, match="shape"): swendsen_wang((0, 3), 0.5)
    with pytest.raises(ValueError, match="shape"): swendsen_wang((3, 3, 3), 0.5)


def test_ising_mixing_study_small(seed):
    "The study's bookkeeping on tiny grids: shapes, positive autocorrelation times, traces that start near +1."
    s = ising_mixing_study(sizes=(4, 6), n_draws=60, n_chains=2, rng=seed(45))
    assert s.tau_gibbs.shape == s.tau_sw.shape == (2,) and np.all(s.tau_gibbs > 0) and np.all(s.tau_sw > 0)
    assert s.m_gibbs.shape == s.m_sw.shape == (2, 60) and np.all(np.abs(s.m_sw) <= 1)
    assert np.all(s.seconds > 0)
