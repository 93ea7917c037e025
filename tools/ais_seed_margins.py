"""Margins over seeds of the checks in nbs/03b_ais.ipynb (annealed importance sampling).

The notebook asserts comparisons whose outcome moves with the seed: importance sampling from the prior against AIS
at equal cost (section 4) and the temperature study (section 5). This script reruns those computations with the
notebook's streams, np.random.SeedSequence([SEED, cell]), for SEED = 0, 1000, 2000, ... (independent streams), and
prints every asserted statistic per seed and its range, so that the margins quoted in the notebook can be checked.

    cd /work/main && OMP_NUM_THREADS=1 .venv/bin/python tools/ais_seed_margins.py [n_seeds]   # about 25 s a seed
"""
import sys

import numpy as np
from scipy import stats

from bayesnotes.ais import ais_temperature_study, ais_vs_importance


def comparison_stats(SEED):
    "The statistics of the section-4 cell (streams SeedSequence([SEED, 16]))."
    cmp = ais_vs_importance(dims=(3, 5, 8), rng=np.random.SeedSequence([SEED, 16]))
    err = cmp.log_evidence - cmp.exact[:, None, None]
    sd = err.std(axis=2, ddof=1)
    rmse = np.sqrt((err ** 2).mean(axis=2))
    p_is = stats.mannwhitneyu(abs(err[0, 0]), abs(err[0, 1]), alternative="less").pvalue   # d = 3: IS errors smaller
    p_ais = stats.mannwhitneyu(abs(err[2, 1]), abs(err[2, 0]), alternative="less").pvalue  # d = 8: AIS errors smaller
    return dict(sd_is=sd[:, 0], sd_ais=sd[:, 1], rmse_is=rmse[:, 0], rmse_ais=rmse[:, 1],
                ess_is=cmp.ess[:, 0].mean(1), ess_ais=cmp.ess[:, 1].mean(1), p_is_d3=p_is, p_ais_d8=p_ais)


def study_stats(SEED):
    "The statistics of the section-5 cell (streams SeedSequence([SEED, 20]))."
    st = ais_temperature_study(rng=np.random.SeedSequence([SEED, 20]))
    v = st.log_evidence.var(axis=1, ddof=1)
    return dict(varT=v * st.n_temps, v1_over_v256=v[0] / v[-1], ess_ratio=st.ess[-1].mean() / st.ess[0].mean())


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    rows = []
    for SEED in range(0, 1000 * n, 1000):
        r = {**comparison_stats(SEED), **study_stats(SEED)}
        rows.append(r)
        print(f"SEED {SEED}: " + "; ".join(f"{k} {np.round(v, 3)}" for k, v in r.items()), flush=True)
    print("ranges over seeds:")
    for k in rows[0]:
        a = np.array([r[k] for r in rows])
        print(f"  {k:13s} min {np.round(a.min(0), 4)}  max {np.round(a.max(0), 4)}")
