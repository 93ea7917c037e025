"""Margins over seeds of the checks in nbs/03b_ais.ipynb (annealed importance sampling), and the long runs it quotes.

The notebook asserts claims whose outcome moves with the seed: the overview figure (annealing_path, cell streams
SeedSequence([SEED, 30])), importance sampling from the prior against AIS at equal cost (section 4, [SEED, 16]), the
mode probabilities and the default scale (section 4, [SEED, 17]) and the temperature study (section 5, [SEED, 20]).
This script reruns those computations with the notebook's streams for SEED = 0, 1000, 2000, ... (independent
streams) and prints every asserted statistic per seed and its range, so that the margins quoted in the notebook can
be checked. `--long` instead runs the long study of section 5 that a notebook cell cannot afford: the variance of
log Z_hat at each number of temperatures T from many independent runs (d = 3, N = 200, k = 1, h = 0.5), with a
bootstrap standard deviation.

    cd /work/main && OMP_NUM_THREADS=1 .venv/bin/python tools/ais_seed_margins.py [n_seeds]   # about 30 s a seed
    cd /work/main && OMP_NUM_THREADS=1 .venv/bin/python tools/ais_seed_margins.py --long      # about 3 minutes
    cd /work/main && OMP_NUM_THREADS=1 .venv/bin/python tools/ais_seed_margins.py --is-ess    # about 20 s

`--is-ess` simulates the law of the importance-sampling ESS fractions of the overview figure (400 prior draws
weighted by L, d = 1 and 3), 20 000 replicates, for the bounds asserted on them.
"""
import sys

import numpy as np
from scipy import special, stats

from bayesnotes.ais import (ais, ais_temperature_study, ais_vs_importance, annealing_path,
                            mixture_evidence_problem)


def path_stats(SEED):
    "The statistics of the overview figure's check cell (streams SeedSequence([SEED, 30]))."
    p = annealing_path(dims=(1, 3), N=400, n_temps=50, n_mcmc=4, scale=0.5, rng=np.random.SeedSequence([SEED, 30]))
    f_is, f_ais = p.ess_is[:, -1] / 400, p.ess_ais[:, -1] / 400
    return dict(path_f_is=f_is, path_f_ais=f_ais, path_ais_over_is=f_ais / f_is)


def comparison_stats(SEED):
    "The statistics of the section-4 cell (streams SeedSequence([SEED, 16]))."
    cmp = ais_vs_importance(dims=(3, 5, 8), rng=np.random.SeedSequence([SEED, 16]))
    err = cmp.log_evidence - cmp.exact[:, None, None]
    sd = err.std(axis=2, ddof=1)
    rmse = np.sqrt((err ** 2).mean(axis=2))
    p_is = stats.mannwhitneyu(abs(err[0, 0]), abs(err[0, 1]), alternative="less").pvalue   # d = 3: IS errors smaller
    p_ais = stats.mannwhitneyu(abs(err[2, 1]), abs(err[2, 0]), alternative="less").pvalue  # d = 8: AIS errors smaller
    return dict(sd_is=sd[:, 0], sd_ais=sd[:, 1], rmse_is=rmse[:, 0], rmse_ais=rmse[:, 1],
                ess_is=cmp.ess[:, 0].mean(1), ess_ais=cmp.ess[:, 1].mean(1), p_is_d3=p_is, p_ais_d8=p_ais,
                var_x_n_is=err[:, 0].var(axis=1, ddof=1) * cmp.cost)


def mode_stats(SEED):
    "The statistics of the mode-probability and default-scale cell of section 4 (streams SeedSequence([SEED, 17]))."
    pb5 = mixture_evidence_problem(dim=5)
    s17 = np.random.SeedSequence([SEED, 17]).spawn(30)
    runs = dict(tuned=[ais(*pb5[:3], 200, n_temps=50, n_mcmc=4, scale=0.5, rng=s) for s in s17[:10]],
                dflt=[ais(*pb5[:3], 200, rng=s) for s in s17[10:20]],
                dscale=[ais(*pb5[:3], 200, n_temps=50, n_mcmc=4, rng=s) for s in s17[20:30]])

    def mode_probs(r):
        W = np.exp(r.log_weights - r.log_weights.max()); W /= W.sum()
        lab = np.argmin(((r.particles[:, None, :] - pb5.means) ** 2).sum(-1), axis=1)
        return np.array([W[lab == j].sum() for j in range(3)])

    mp = np.array([mode_probs(r) for r in runs["tuned"]])
    out = dict(mode_sd_mean=mp.std(0, ddof=1).mean(), mode_sd=mp.std(0, ddof=1),
               mode_err=np.abs(mp.mean(0) - [0.5, 0.3, 0.2]))
    for name, rs in runs.items():
        e = np.array([r.log_evidence for r in rs]) - pb5.log_evidence
        out[f"{name}_rmse"] = np.sqrt((e ** 2).mean())
        out[f"{name}_ess"] = np.mean([r.ess for r in rs])
        out[f"{name}_acc_last"] = np.mean([r.acceptance[-1] for r in rs])
    out["rmse_dscale_over_tuned"] = out["dscale_rmse"] / out["tuned_rmse"]
    out["rmse_dflt_over_dscale"] = out["dflt_rmse"] / out["dscale_rmse"]
    return out


def study_stats(SEED):
    "The statistics of the section-5 cell (streams SeedSequence([SEED, 20]))."
    st = ais_temperature_study(rng=np.random.SeedSequence([SEED, 20]))
    v = st.log_evidence.var(axis=1, ddof=1)
    return dict(varT=v * st.n_temps, v1_over_v256=v[0] / v[-1], v4_over_v1=v[1] / v[0],
                ess_ratio=st.ess[-1].mean() / st.ess[0].mean(), ess_frac_256=st.ess[-1].mean() / st.N)


def long_study(runs=((4, 4000), (16, 2000), (64, 1000), (256, 500)), seed=20_261_128):
    """Var log Z_hat of the section-5 setting from many independent runs per T (T = 1 vectorised, 24 000 runs), with
    the bootstrap sd of each variance, variance x T and variance x (1 + T)."""
    pb = mixture_evidence_problem(3)
    ss = np.random.SeedSequence([seed, 1])
    g = np.random.default_rng(ss.spawn(1)[0])
    e1 = np.concatenate([special.logsumexp(pb.log_lik(pb.prior_sample(g, 3000 * 200)).reshape(3000, 200), axis=1)
                         for _ in range(8)]) - np.log(200) - pb.log_evidence
    res = [(1, e1)]
    for T, R in runs:
        le = np.array([ais(*pb[:3], 200, n_temps=T, scale=0.5, rng=c).log_evidence for c in ss.spawn(R)])
        res.append((T, le - pb.log_evidence))
    boot = np.random.default_rng(0)
    for T, e in res:
        v = e.var(ddof=1)
        bs = np.array([boot.choice(e, e.size).var(ddof=1) for _ in range(300)]).std()
        print(f"T = {T:3d}: {e.size:5d} runs, Var log Z_hat {v:.4f} (bootstrap sd {bs:.4f}), variance x T {v * T:.3f}, "
              f"variance x (1 + T) {v * (1 + T):.3f}, mean error {e.mean():+.3f}", flush=True)


def is_ess_quantiles(R=20_000, N=400, seed=20_261_129):
    "Quantiles of ESS / N of importance sampling from the prior (N draws, weights L) in d = 1 and 3, R replicates."
    from bayesnotes.core import ess
    g = np.random.default_rng(seed)
    for d in (1, 3):
        pb = mixture_evidence_problem(d)
        f = np.concatenate([[ess(row) / N for row in pb.log_lik(pb.prior_sample(g, 1000 * N)).reshape(1000, N)]
                            for _ in range(R // 1000)])
        q = [1e-4, 1e-3, 0.01, 0.5, 0.99, 0.999, 1 - 1e-4]
        print(f"d = {d}: ESS / N quantiles {dict(zip(q, np.quantile(f, q).round(4)))}; min {f.min():.4f}, max {f.max():.4f}")


if __name__ == "__main__":
    if "--is-ess" in sys.argv:
        is_ess_quantiles()
        sys.exit()
    if "--long" in sys.argv:
        long_study()
        sys.exit()
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    rows = []
    for SEED in range(0, 1000 * n, 1000):
        r = {**path_stats(SEED), **comparison_stats(SEED), **mode_stats(SEED), **study_stats(SEED)}
        rows.append(r)
        print(f"SEED {SEED}: " + "; ".join(f"{k} {np.round(v, 3)}" for k, v in r.items()), flush=True)
    print("ranges over seeds:")
    for k in rows[0]:
        a = np.array([r[k] for r in rows])
        print(f"  {k:22s} min {np.round(a.min(0), 4)}  max {np.round(a.max(0), 4)}")
