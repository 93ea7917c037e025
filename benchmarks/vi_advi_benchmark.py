"""ADVI on breast-cancer logistic regression: time to the ELBO plateau and posterior-mean error.

Not part of the test run. Usage (from the repository root):

    .venv/bin/python benchmarks/vi_advi_benchmark.py [--draws 2000] [--seed 0]

What is measured
* Target: Bayesian logistic regression on scikit-learn's breast-cancer data (569 x 31: 30 standardised
  features and an intercept), prior N(0, I) (`bayesnotes.targets.logistic_regression`).
* Reference posterior: NUTS from the MCMC chapter (`bayesnotes.mcmc.sample`, 4 chains, Stan-style warm-up),
  summarised by its mean and sd with Monte Carlo standard errors (`bayesnotes.diagnostics`). If the MCMC
  chapter is not importable, self-normalised importance sampling from a Student-t fitted at the Laplace
  approximation is used instead (its ESS is printed).
* Plateau: for each family, a long ADVI run (8000 steps, decaying step size, Polyak averaging of the last half)
  whose ELBO is then estimated with 20,000 draws; "plateau" is that value.
* Timed run: plain ADVI from N(0, I), 10 draws per step, step size 0.05 / (1 + t/100)^0.8. A callback stores the
  parameters, the wall clock and the process CPU time every 25 steps; afterwards (outside the timed region) the ELBO at every checkpoint is estimated with
  4,000 draws (standard error < 0.05 nats). Time to plateau = wall time at the first checkpoint within 1 nat
  of the plateau (wall and CPU time are both reported: the machine may be shared). The time spent in the
  callback is negligible (an array copy).
* Error: |E_q[w] - E_ref[w]| in units of the reference posterior sd (max and root mean square over the 31
  coefficients), and the ratio of q's sds to the reference sds.
"""
import argparse
import time

import numpy as np

from bayesnotes.datasets import load_breast_cancer
from bayesnotes.targets import logistic_regression
from bayesnotes.vi import advi, elbo, laplace


def reference_posterior(t, draws, seed, use_nuts=True):
    "Reference mean, sd and a description, from NUTS if available (and asked for) else importance sampling."
    sample = None
    if use_nuts:
        try:
            from bayesnotes.mcmc import sample
            from bayesnotes.diagnostics import ess_bulk, mcse_mean, rhat
        except ImportError:
            pass
    if sample is not None:
        t0 = time.perf_counter()
        res = sample("nuts", t, x0=np.zeros(t.dim), n_warmup=1000, n_draws=draws, n_chains=4, rng=seed)
        D = res.draws
        mean, sd = D.mean((0, 1)), D.std((0, 1))
        info = (f"NUTS 4 x {draws} draws in {time.perf_counter() - t0:.1f} s; max R-hat {np.max(rhat(D)):.3f}, "
                f"min bulk ESS {np.min(ess_bulk(D)):.0f}, max MCSE(mean)/sd {np.max(mcse_mean(D) / sd):.3f}")
        return mean, sd, info
    from scipy import special, stats
    lap = laplace(t, np.zeros(t.dim))
    rng = np.random.default_rng(seed)
    prop = stats.multivariate_t(lap.mode, 1.2 * lap.cov, df=10, seed=rng)
    W = prop.rvs(200_000)
    lw = t.value_and_grad_batch(W)[0] - prop.logpdf(W)
    w = np.exp(lw - special.logsumexp(lw))
    mean = w @ W
    sd = np.sqrt(w @ (W - mean) ** 2)
    return mean, sd, f"importance sampling, 200,000 draws, ESS {1 / np.sum(w**2):.0f}"


def plateau(t, family, seed):
    "ELBO of a long, carefully converged run (the plateau)."
    res = advi(t, family=family, n_iter=8000, lr=lambda s: 0.05 / (1 + s / 500) ** 0.6, rng=seed, average=0.5)
    return elbo(t, res.q, 20000, rng=seed + 1), res.q


def timed_run(t, family, n_iter, lr, seed, every=25):
    "Plain ADVI with checkpoints (step, wall time, params)."
    checkpoints = []
    def cb(step, q):
        if (step + 1) % every == 0:
            checkpoints.append((step + 1, time.perf_counter(), time.process_time(), q.params.copy()))
    t0, c0 = time.perf_counter(), time.process_time()
    res = advi(t, family=family, n_iter=n_iter, lr=lr, n_mc=10, rng=seed, callback=cb)
    total = time.perf_counter() - t0
    return res, [(s, w - t0, c - c0, p) for s, w, c, p in checkpoints], total


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=2000, help="NUTS draws per chain for the reference")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reference", choices=("nuts", "is"), default="nuts",
                    help="reference posterior: NUTS (slow, default) or importance sampling")
    args = ap.parse_args()
    X, y = load_breast_cancer()
    t = logistic_regression(X, y, prior_scale=1.0)
    print(f"breast-cancer logistic regression: n = {X.shape[0]}, d = {X.shape[1]}, prior N(0, I)")
    ref_mean, ref_sd, info = reference_posterior(t, args.draws, args.seed, args.reference == "nuts")
    print("reference:", info)
    lap = laplace(t, np.zeros(t.dim))
    z = np.abs(lap.mode - ref_mean) / ref_sd
    print(f"Laplace: max |mode - mean|/sd = {z.max():.3f}, rms = {np.sqrt(np.mean(z**2)):.3f}, "
          f"sd ratio in [{(np.sqrt(np.diag(lap.cov)) / ref_sd).min():.2f}, {(np.sqrt(np.diag(lap.cov)) / ref_sd).max():.2f}], "
          f"log evidence {lap.log_evidence:.2f}")
    print()
    print(f"{'family':>10} {'plateau':>9} {'wall to plateau-1':>18} {'cpu':>6} {'steps':>6} {'run':>7} {'final ELBO':>11} "
          f"{'max err/sd':>10} {'rms err/sd':>10} {'sd ratio':>10}")
    lr = lambda s: 0.05 / (1 + s / 100) ** 0.8
    for family, n_iter in (("meanfield", 2000), ("fullrank", 2000)):
        plat, qlong = plateau(t, family, args.seed)
        res, cps, total = timed_run(t, family, n_iter, lr, args.seed)
        hit = None
        for step, wall, cpu, p in cps:
            e = elbo(t, res.q.with_params(p), 4000, rng=step)
            if e.value >= plat.value - 1.0:
                hit = (step, wall, cpu)
                break
        final = elbo(t, res.q, 20000, rng=99)
        z = np.abs(np.asarray(res.q.mean) - ref_mean) / ref_sd
        ratio = np.sqrt(np.diag(res.q.cov)) / ref_sd
        when = f"{hit[1]:.2f} s" if hit else "not reached"
        cpu = f"{hit[2]:.2f}s" if hit else "-"
        print(f"{family:>10} {plat.value:9.2f} {when:>18} {cpu:>6} {hit[0] if hit else '-':>6} {total:6.2f}s {final.value:11.2f} "
              f"{z.max():10.3f} {np.sqrt(np.mean(z**2)):10.3f} {ratio.min():5.2f}-{ratio.max():4.2f}")
        zl = np.abs(np.asarray(qlong.mean) - ref_mean) / ref_sd
        print(f"{'':>10} (long, averaged run: max err/sd {zl.max():.3f}, rms {np.sqrt(np.mean(zl**2)):.3f})")


if __name__ == "__main__":
    main()
