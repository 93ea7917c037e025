"""Pooled comparison over seeds of the waste-free section of nbs/05d_smc_samplers.ipynb (waste-free SMC against
standard tempered SMC at the same budget per move).

The notebook's cell runs `waste_free_comparison(n_rep=40, rng=SEED)`: 40 independent runs of each of five samplers,
whose streams are np.random.SeedSequence([SEED, k]), so that neighbouring SEED values share no run. An ESS from 40
runs has a relative error of about 0.23, so the ratios the text states come from this pool instead: SEED = 0..n-1,
the same streams as the notebook at those seeds, 40 n runs per sampler. It prints, per seed and pooled, the ESS per
evaluation of each waste-free sampler relative to the standard samplers (k = 1, 5, 20), and the rank of each sampler's
variance of log Z_hat, and asserts the pooled statements of the text with F bounds (stated below).

    cd /work/main && OMP_NUM_THREADS=1 nice .venv/bin/python tools/smcsamplers_seed_margins.py [n_seeds]   # about 3 s a seed
"""
import sys
import time

import numpy as np
from scipy import stats

from bayesnotes.smcsamplers import _gaussian_reference, waste_free_comparison


def main(n_seeds=20):
    ref = _gaussian_reference()
    t0, per_seed = time.perf_counter(), []
    for SEED in range(n_seeds):
        per_seed.append(waste_free_comparison(n_rep=40, rng=SEED))
    names = [r.name.replace("\n", " ") for r in per_seed[0]]
    print(f"{n_seeds} seeds x 40 runs per sampler, {time.perf_counter() - t0:.0f} s; samplers: {names}")
    eff = lambda means, evals: ref.variance / means.var(0, ddof=1) / evals.mean()
    single = np.array([[eff(r.means, r.evaluations) for r in runs] for runs in per_seed])     # (seed, sampler, coord)
    means = [np.concatenate([runs[j].means for runs in per_seed]) for j in range(5)]
    evals = [np.concatenate([runs[j].evaluations for runs in per_seed]) for j in range(5)]
    pooled = np.array([eff(m, e) for m, e in zip(means, evals)])                           # (sampler, coord)
    print("\nESS per 1000 evaluations, pooled (mu, sigma):")
    for n, p in zip(names, pooled):
        print(f"  {n:24s} {np.round(1000 * p, 1)}")
    nu = 40 * n_seeds - 1
    q = stats.f.isf(1e-6 / 2, nu, nu)     # a pooled ratio is the true ratio times F(nu, nu): beyond q w.p. 1e-6 / 2
    print(f"\nratios of ESS per evaluation (mu, sigma); an F({nu}, {nu}) factor exceeds {q:.3f} w.p. 5e-7")
    for w in (0, 1):
        for s, k in ((2, 1), (3, 5), (4, 20)):
            r_pool, r_seed = pooled[w] / pooled[s], single[:, w] / single[:, s]
            print(f"  {names[w]:24s} / k = {k:2d}: pooled {r_pool.round(2)}, single seeds {r_seed.min():.2f}..{r_seed.max():.2f}"
                  f" (mu {r_seed[:, 0].min():.2f}..{r_seed[:, 0].max():.2f}, sigma {r_seed[:, 1].min():.2f}..{r_seed[:, 1].max():.2f})")
    var_lz = np.array([[r.log_evidence.var(ddof=1) for r in runs] for runs in per_seed])   # (seed, sampler)
    rank = var_lz.argsort(1).argsort(1)                                                    # 0: smallest variance
    print("\nrank of the variance of log Z_hat (0 = smallest), per seed:")
    for j, n in enumerate(names):
        print(f"  {n:24s} {np.bincount(rank[:, j], minlength=5)}  pooled var {np.concatenate([r[j].log_evidence for r in per_seed]).var(ddof=1):.4f}")
    # the text's pooled statements, each a lower or upper confidence bound at false alarm 5e-7 (one-sided F), 16 bounds:
    # together < 1e-5
    for w in (0, 1):
        assert np.all(pooled[w] / pooled[2] / q > 3.5), "waste-free: more than 3.5 x the ESS per evaluation of k = 1"
        assert np.all(pooled[w] / pooled[4] / q > 1.2), "waste-free: more than 1.2 x the ESS per evaluation of k = 20"
        assert np.all((pooled[w] / pooled[3] / q > 0.4) & (pooled[w] / pooled[3] * q < 1.2)), \
            "waste-free: fairly close to k = 5 (0.4 .. 1.2 of its ESS per evaluation)"
    return pooled, single, var_lz


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
