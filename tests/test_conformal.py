"""Full conformal prediction for ridge regression, the jackknife+ and CV+ (bayesnotes.decision).

Exact checks: the closed-form full-conformal set against brute force (one ridge refit per candidate label and the rank
rule applied directly), its end points to 1e-7 relative; jackknife+ and CV+ leave-out quantities against the ridge
downdate formulas to 1e-10; the quantile rule against sorted order statistics; reductions to split conformal. Coverage
checks count, over independent replications with one test point each, how often the set covers: that count is
Binomial(R, coverage), and each bound below is an exact binomial tail with its false-alarm probability stated. Seeds
come from the `seed` fixture."""
import math

import numpy as np
import pytest
from scipy import stats

from bayesnotes.decision import (conformal_comparison, cv_plus, jackknife_plus, ridge_fit, ridge_full_conformal,
                                 split_conformal_regression)


def _ridge(X, y, lam):
    "Independent reference: ridge coefficients by a dense solve of the normal equations."
    return np.linalg.solve(X.T @ X + lam * np.eye(X.shape[1]), X.T @ y)


def _brute_inside(X, y, x, t, alpha, lam):
    "Brute force: refit ridge on the data plus (x, t) for every candidate t; keep t if its score is <= the k-th smallest."
    k = math.ceil((len(y) + 1) * (1 - alpha) - 1e-12)
    Xa = np.vstack([X, x])
    out = np.empty(len(t), dtype=bool)
    for j, tj in enumerate(t):
        ya = np.append(y, tj)
        s = np.abs(ya - Xa @ _ridge(Xa, ya, lam))
        out[j] = s[-1] <= np.sort(s[:-1])[k - 1]
    return out


def _problem(rng, n, p, heavy):
    if heavy:   # heavy-tailed labels, uneven row scales and a far-out test input: unions and unbounded sets occur
        X = rng.normal(size=(n, p)) * rng.exponential(1.0, (n, 1))
        return X, rng.standard_cauchy(n), rng.normal(size=p) * 5
    X = rng.normal(size=(n, p))
    return X, X @ rng.normal(size=p) + rng.standard_t(3, n), rng.normal(size=p)


@pytest.mark.parametrize("heavy", [False, True])
def test_ridge_full_conformal_matches_brute_force(heavy, seed):
    """Catches a wrong breakpoint formula, a wrong rank (k or k - 1, < or <=), a piece evaluated at the wrong point,
    intervals merged across a gap, or a wrong shift back from u = t - f(x) to t."""
    rng = np.random.default_rng(seed(40 + heavy))
    for n, p, lam, alpha in ((6, 1, 0.0, 0.25), (10, 2, 0.5, 0.2), (20, 3, 5.0, 0.1), (9, 2, 1.0, 0.4), (15, 1, 0.1, 0.12)):
        X, y, x = _problem(rng, n, p, heavy)
        fc = ridge_full_conformal(X, y, x[None], alpha, lam)
        iv = fc.intervals[0]
        ends = iv[np.isfinite(iv)]
        lo_g = ends.min() - 5 if ends.size else -20.0
        hi_g = ends.max() + 5 if ends.size else 20.0
        t = np.linspace(lo_g, hi_g, 801)
        exact = np.any((t[:, None] >= iv[:, 0]) & (t[:, None] <= iv[:, 1]), axis=1)
        far = np.all(np.abs(t[:, None] - ends) > 1e-9 * (1 + np.abs(ends)), axis=1) if ends.size else np.ones(len(t), bool)
        assert np.array_equal(exact[far], _brute_inside(X, y, x, t, alpha, lam)[far]), (n, p, lam, alpha, iv)
        # every finite end point is a boundary of the brute-force set to 1e-7 relative: out just outside, in just inside
        for (a, b) in iv:
            for e, sign in ((a, -1.0), (b, 1.0)):
                if np.isfinite(e):
                    d = 1e-7 * (1 + abs(e))
                    assert min(b - a, np.inf) > 2 * d
                    assert list(_brute_inside(X, y, x, np.array([e + sign * d, e - sign * d]), alpha, lam)) == [False, True]
        assert fc.lower[0] == iv[0, 0] and fc.upper[0] == iv[-1, 1]
        assert fc.width[0] == pytest.approx(np.sum(iv[:, 1] - iv[:, 0]))


def test_full_conformal_union_and_unbounded_sets_occur():
    """The brute-force comparison above must meet the hard cases: on heavy-tailed problems (example data, literal seed)
    some sets are unions of two or more intervals and some are unbounded, and those agree with brute force too."""
    rng = np.random.default_rng(1)
    seen = {"union": 0, "unbounded": 0}
    for _ in range(300):
        X, y, x = _problem(rng, 8, 2, heavy=True)
        iv = ridge_full_conformal(X, y, x[None], 0.25, 1.0).intervals[0]
        kind = "union" if len(iv) > 1 and np.all(np.isfinite(iv)) else "unbounded" if not np.all(np.isfinite(iv)) else None
        if kind and seen[kind] < 3:
            seen[kind] += 1
            ends = iv[np.isfinite(iv)]
            t = np.linspace(ends.min() - 50, ends.max() + 50, 1501) if ends.size else np.linspace(-100, 100, 201)
            exact = np.any((t[:, None] >= iv[:, 0]) & (t[:, None] <= iv[:, 1]), axis=1)
            far = np.all(np.abs(t[:, None] - ends) > 1e-9 * (1 + np.abs(ends)), axis=1)
            assert np.array_equal(exact[far], _brute_inside(X, y, x, t, 0.25, 1.0)[far]), iv
    assert seen == {"union": 3, "unbounded": 3}


def test_full_conformal_contains_prediction_and_is_bounded_iff_k_small_v(seed):
    rng = np.random.default_rng(seed(42))
    X = np.column_stack([np.ones(200), rng.normal(size=(200, 3))])
    y = X @ [1.0, 0.5, -1.0, 2.0] + rng.normal(size=200)
    Xt = np.column_stack([np.ones(10), rng.normal(size=(10, 3))])
    fc = ridge_full_conformal(X, y, Xt, 0.1, 1.0)
    f = ridge_fit(X, y, 1.0)(Xt)
    assert np.all((fc.lower <= f) & (f <= fc.upper))            # at t = f(x) the test score is 0: always kept
    # bounded exactly when at least k of the |v_i| = |x_i^T A^{-1} x| are below 1 (here all of them are)
    V = np.abs(X @ np.linalg.solve(X.T @ X + np.eye(4), Xt.T))
    assert np.all(V < 1) and np.all(np.isfinite(fc.width))
    # 1e4 times the intercept direction: every |v_i| exceeds 1, fewer than k training scores stay below the test
    # score as |t| grows, and the set is unbounded
    far = np.array([[1.0, 0.0, 0.0, 0.0]]) * 1e4
    v = np.abs(X @ np.linalg.solve(X.T @ X + np.eye(4), far.T)).ravel()
    k = math.ceil(201 * 0.9)
    assert np.sum(v < 1) < k and not np.isfinite(ridge_full_conformal(X, y, far, 0.1, 1.0).width[0])


def test_jackknife_plus_matches_ridge_downdate_formulas(seed):
    """Leave-one-out by refits vs the closed forms R_i = |e_i| / (1 - h_ii) and
    mu_{-i}(x) = f(x) - x^T A^{-1} x_i e_i / (1 - h_ii): catches a refit that keeps point i or predicts with the wrong fit."""
    rng = np.random.default_rng(seed(43))
    for lam in (0.0, 2.0):
        X = np.column_stack([np.ones(25), rng.normal(size=(25, 3))])
        y, Xt = rng.standard_t(3, 25), rng.normal(size=(6, 4))
        jk = jackknife_plus(X, y, Xt, lambda A, b: ridge_fit(A, b, lam), 0.1)
        Ainv = np.linalg.inv(X.T @ X + lam * np.eye(4))
        e = y - X @ _ridge(X, y, lam)
        h = np.einsum("ip,pq,iq->i", X, Ainv, X)
        assert np.allclose(jk.residuals, np.abs(e) / (1 - h), rtol=0, atol=1e-10)
        loo = (Xt @ _ridge(X, y, lam))[None] - (X @ Ainv @ Xt.T) * (e / (1 - h))[:, None]
        assert np.allclose(jk.loo_pred, loo, rtol=0, atol=1e-10)


def test_cv_plus_matches_ridge_block_downdate(seed):
    """Each CV+ fold: R_S = |(I - H_SS)^{-1} e_S| and mu_{-S}(x) = f(x) - x^T A^{-1} X_S^T (I - H_SS)^{-1} e_S, with the
    folds read off the rows of loo_pred (points of one fold share their fit). Catches a fold whose points are not left
    out, residuals paired with the wrong fold, and unequal or missing folds."""
    rng = np.random.default_rng(seed(44))
    n, K, lam = 23, 5, 0.5
    X = np.column_stack([np.ones(n), rng.normal(size=(n, 2))])
    y, Xt = rng.normal(size=n), rng.normal(size=(4, 3))
    cv = cv_plus(X, y, Xt, lambda A, b: ridge_fit(A, b, lam), 0.1, n_folds=K, rng=seed(45))
    _, fold = np.unique(np.round(cv.loo_pred, 9), axis=0, return_inverse=True)
    fold = fold.ravel()
    assert sorted(np.bincount(fold)) == [4, 4, 5, 5, 5]                 # 23 = 4 + 4 + 5 + 5 + 5
    Ainv = np.linalg.inv(X.T @ X + lam * np.eye(3))
    e = y - X @ _ridge(X, y, lam)
    for f in range(K):
        S = np.flatnonzero(fold == f)
        w = np.linalg.solve(np.eye(len(S)) - X[S] @ Ainv @ X[S].T, e[S])
        assert np.allclose(cv.residuals[S], np.abs(w), rtol=0, atol=1e-10)
        assert np.allclose(cv.loo_pred[S[0]], Xt @ _ridge(X, y, lam) - Xt @ Ainv @ X[S].T @ w, rtol=0, atol=1e-10)


def test_plus_intervals_follow_the_definition(seed):
    """Lower end the floor(alpha (n+1))-th smallest of mu_{-i}(x) - R_i, upper end the ceil((1-alpha)(n+1))-th smallest
    of mu_{-i}(x) + R_i (sorted by hand); mirror symmetry; K = n is the jackknife+; a predictor that ignores the data
    gives split conformal with all n points as calibration set."""
    rng = np.random.default_rng(seed(46))
    fit = lambda A, b: ridge_fit(A, b, 1.0)
    for n, alpha in ((19, 0.1), (30, 0.1), (24, 0.2), (40, 0.05), (89, 0.3)):   # (89, 0.3): (n+1)(1-alpha) = 63.000...01
        X, y, Xt = rng.normal(size=(n, 2)), rng.normal(size=n), rng.normal(size=(3, 2))
        jk = jackknife_plus(X, y, Xt, fit, alpha)
        k_hi, k_lo = math.ceil((1 - alpha) * (n + 1) - 1e-12), math.floor(alpha * (n + 1) + 1e-12)
        assert k_lo == n + 1 - k_hi
        assert np.array_equal(jk.upper, np.sort(jk.loo_pred + jk.residuals[:, None], axis=0)[k_hi - 1])
        assert np.array_equal(jk.lower, np.sort(jk.loo_pred - jk.residuals[:, None], axis=0)[k_lo - 1])
        assert np.all(jk.lower <= jk.upper)                              # alpha < 1/2: never empty
        neg = jackknife_plus(X, -y, Xt, fit, alpha)                       # ridge is linear in y
        assert np.allclose(neg.lower, -jk.upper, atol=1e-12) and np.allclose(neg.upper, -jk.lower, atol=1e-12)
        cvn = cv_plus(X, y, Xt, fit, alpha, n_folds=n, rng=seed(47))
        assert np.allclose(cvn.lower, jk.lower, atol=1e-12) and np.allclose(cvn.upper, jk.upper, atol=1e-12)
        zero = lambda A, b: (lambda Z: np.zeros(len(Z)))
        sc = split_conformal_regression(y, np.zeros(n), np.zeros(3), alpha)
        for plus in (jackknife_plus(X, y, Xt, zero, alpha), cv_plus(X, y, Xt, zero, alpha, 4, rng=seed(48))):
            assert np.array_equal(plus.upper, sc.upper) and np.array_equal(plus.lower, sc.lower)


def _linear_data(rng, n):
    X = np.column_stack([np.ones(n), rng.uniform(-2, 2, (n, 2))])
    return X, X @ [0.5, 1.0, -1.0] + rng.standard_t(3, n)


def test_split_and_full_conformal_coverage_is_exactly_k_over_n_plus_1(seed):
    """Coverage guarantee: for split and full conformal, P(cover) = k/(n'+1) exactly for continuous scores (between
    1 - alpha and 1 - alpha + 1/(n'+1)). R = 4000 independent data sets of n = 20 points plus one test point (t_3 noise,
    ridge lambda = 0.5, alpha = 0.1): full conformal k = 19 of 21 (0.905), split on 10 + 10 points k = 10 of 11 (0.909).
    The number covered is Binomial(4000, k/(n'+1)); two-sided exact tails at 2.5e-5 each, two methods: false alarm 1e-4.
    An off-by-one rank (18/21 or 9/11) moves the coverage by 0.048 or 0.091, 10 or 19 binomial sd."""
    rng = np.random.default_rng(seed(49))
    R, n, alpha, lam = 4000, 20, 0.1, 0.5
    hits = {"full": 0, "split": 0}
    for _ in range(R):
        X, y = _linear_data(rng, n + 1)
        fc = ridge_full_conformal(X[:n], y[:n], X[n:], alpha, lam)
        hits["full"] += int(np.any((y[n] >= fc.intervals[0][:, 0]) & (y[n] <= fc.intervals[0][:, 1])))
        pred = ridge_fit(X[:10], y[:10], lam)
        sc = split_conformal_regression(y[10:n], pred(X[10:n]), pred(X[n:]), alpha)
        hits["split"] += int(sc.lower[0] <= y[n] <= sc.upper[0])
    for m, p in (("full", 19 / 21), ("split", 10 / 11)):
        assert stats.binom.cdf(hits[m], R, p) > 2.5e-5 and stats.binom.sf(hits[m] - 1, R, p) > 2.5e-5, (m, hits[m] / R)


def test_jackknife_plus_and_cv_plus_coverage_bounds(seed):
    """Coverage guarantees of Barber et al. (2021): jackknife+ >= 1 - 2 alpha = 0.8; CV+ with n = 20, K = 5 (folds of 4)
    >= 0.8 - min(2 (1 - 1/5) / 5, (1 - 5/20) / 6) = 0.675. R = 1500 independent data sets, one test point each; the
    count covered is Binomial(1500, coverage) with coverage >= the bound: one-sided exact tail at 5e-5 per method,
    false alarm 1e-4. (Both typically cover about 0.9, so this only catches gross errors; the exact tests above catch
    the rest.)"""
    rng = np.random.default_rng(seed(50))
    R, n, alpha = 1500, 20, 0.1
    fit = lambda A, b: ridge_fit(A, b, 0.5)
    hits = {"jackknife+": 0, "CV+": 0}
    for _ in range(R):
        X, y = _linear_data(rng, n + 1)
        for m, iv in (("jackknife+", jackknife_plus(X[:n], y[:n], X[n:], fit, alpha)),
                      ("CV+", cv_plus(X[:n], y[:n], X[n:], fit, alpha, n_folds=5, rng=rng))):
            hits[m] += int(iv.lower[0] <= y[n] <= iv.upper[0])
    for m, p in (("jackknife+", 0.8), ("CV+", 0.8 - min(2 * 0.8 / 5, 0.75 / 6))):
        assert stats.binom.cdf(hits[m], R, p) > 5e-5, (m, hits[m] / R)


def test_conformal_comparison_shapes_and_cache(seed):
    cmp = conformal_comparison(n=20, n_reps=3, n_test=4, rng=seed(51))
    assert set(cmp.hits) == {"split", "full", "jackknife+", "CV+"}
    assert all(v.shape == (3, 4) for v in (*cmp.hits.values(), *cmp.widths.values(), cmp.n_pieces))
    assert conformal_comparison(n=20, n_reps=3, n_test=4, rng=seed(51)) is cmp       # int seed: cached
    with pytest.raises(ValueError, match="n \\+ n_test"):
        conformal_comparison(n=400, n_test=100, rng=0)
    for kw, name in ((dict(n_reps=0), "n_reps"), (dict(n_test=0), "n_test"), (dict(n=2), "n")):   # never an empty study
        with pytest.raises(ValueError, match=name):
            conformal_comparison(rng=0, **kw)


def test_conformal_comparison_records_each_method_on_its_own_split(seed):
    """Review 06_conformal item 5: two subsamples rebuilt by hand from the same generator (the permutation, then CV+'s
    folds, in the function's order) give exactly the recorded hits, widths and piece counts of every method."""
    from bayesnotes.decision import _load_diabetes
    s, n, n_test, alpha, lam = seed(52), 24, 5, 0.2, 1.0
    cmp = conformal_comparison(n=n, alpha=alpha, n_reps=2, n_test=n_test, lam=lam, n_folds=4, rng=s)
    Xa, ya = _load_diabetes()
    rng, fit, h = np.random.default_rng(s), (lambda A, b: ridge_fit(A, b, lam)), n // 2
    for r in range(2):
        perm = rng.permutation(len(ya))
        X, y, Xt, yt = Xa[perm[:n]], ya[perm[:n]], Xa[perm[n:n + n_test]], ya[perm[n:n + n_test]]
        pred = fit(X[:h], y[:h])
        sets = {"split": split_conformal_regression(y[h:], pred(X[h:]), pred(Xt), alpha)[:2],
                "jackknife+": jackknife_plus(X, y, Xt, fit, alpha)[:2],
                "CV+": cv_plus(X, y, Xt, fit, alpha, 4, rng)[:2]}
        fc = ridge_full_conformal(X, y, Xt, alpha, lam)
        for m, (lo, hi) in sets.items():
            assert np.array_equal(cmp.hits[m][r], (yt >= lo) & (yt <= hi)) and np.allclose(cmp.widths[m][r], hi - lo)
        inside = [any(a <= t <= b for a, b in iv) for t, iv in zip(yt, fc.intervals)]
        assert np.array_equal(cmp.hits["full"][r], inside) and np.allclose(cmp.widths["full"][r], fc.width)
        assert np.array_equal(cmp.n_pieces[r], [len(iv) for iv in fc.intervals])
    assert not np.array_equal(cmp.widths["split"], cmp.widths["full"])           # the methods really differ


def test_conformal_bad_input():
    rng = np.random.default_rng(0)
    X, y, Xt = rng.normal(size=(12, 2)), rng.normal(size=12), rng.normal(size=(3, 2))
    fit = lambda A, b: ridge_fit(A, b, 1.0)
    for a in (0.0, 1.0, -0.1, 1.5, np.nan):
        for call in (lambda: ridge_full_conformal(X, y, Xt, a), lambda: jackknife_plus(X, y, Xt, fit, a),
                     lambda: cv_plus(X, y, Xt, fit, a)):
            with pytest.raises(ValueError, match="alpha"):
                call()
    for lam in (-1.0, np.nan, [1.0, 2.0], None):
        with pytest.raises(ValueError, match="lam"):
            ridge_full_conformal(X, y, Xt, 0.2, lam)
        with pytest.raises(ValueError, match="lam"):
            ridge_fit(X, y, lam)
    with pytest.raises(ValueError, match="lam"):                    # singular X^T X with lam = 0
        ridge_full_conformal(np.column_stack([X[:, 0], X[:, 0]]), y, np.ones((1, 2)), 0.2, 0.0)
    for Xs in (np.column_stack([X[:, 0], 3 * X[:, 0]]),                 # rank 1, pivots ~1e-8 after rounding
               np.column_stack([np.ones(len(y)), X[:, 0], 2 + X[:, 0]])):   # a shifted copy next to an intercept
        with pytest.raises(ValueError, match="lam"):
            ridge_full_conformal(Xs, y, np.ones((1, Xs.shape[1])), 0.2, 0.0)
    with pytest.raises(ValueError, match="^y"):
        ridge_full_conformal(X, y[:-1], Xt, 0.2)
    with pytest.raises(ValueError, match="X_new"):
        ridge_full_conformal(X, y, rng.normal(size=(3, 3)), 0.2)
    with pytest.raises(ValueError, match="X_new"):
        jackknife_plus(X, y, rng.normal(size=(3, 3)), fit, 0.2)
    with pytest.raises(ValueError, match="^X"):
        cv_plus(np.full((12, 2), np.nan), y, Xt, fit, 0.2)
    # too few points for the rank: k = ceil(0.95 * 13) = 13 > 12
    for call in (lambda: ridge_full_conformal(X, y, Xt, 0.05), lambda: jackknife_plus(X, y, Xt, fit, 0.05),
                 lambda: cv_plus(X, y, Xt, fit, 0.05)):
        with pytest.raises(ValueError, match="y has n = 12 points, too few for alpha = 0.05"):
            call()
    with pytest.raises(ValueError, match="fit"):
        jackknife_plus(X, y, Xt, "ridge", 0.2)
    with pytest.raises(ValueError, match="fit"):
        jackknife_plus(X, y, Xt, lambda A, b: 3.0, 0.2)                      # returns no callable
    with pytest.raises(ValueError, match="fit"):
        cv_plus(X, y, Xt, lambda A, b: (lambda Z: np.zeros(2)), 0.2)          # wrong number of predictions
    with pytest.raises(ValueError, match="fit"):
        jackknife_plus(X, y, Xt, lambda A, b: (lambda Z: np.full(len(Z), np.nan)), 0.2)
    for K in (1, 13, 2.5, True):
        with pytest.raises(ValueError, match="n_folds"):
            cv_plus(X, y, Xt, fit, 0.2, n_folds=K)
