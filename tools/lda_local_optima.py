"""How often does one CAVI start of `lda_vb` end in a worse local optimum? (the measurement behind 01d's text and
tests/test_viconjugate.py::test_lda_elbo_monotone_and_recovery)

    python tools/lda_local_optima.py --init kmeans --offsets 0:300              # one start per corpus
    python tools/lda_local_optima.py --init random --offsets 100:125 --starts 8 # 8 starts per corpus
    python tools/lda_local_optima.py --init both --offsets 0:10 --starts 5      # 5 starts of each init per corpus
    python tools/lda_local_optima.py --init both --chapter --starts 15          # the chapter's corpus (_lda_example)

Corpus `off` is the test's: `lda_corpus(300 documents, K = 4, V = 30, 60 words, alpha = 0.3, eta = 0.1, rng=4 + off)`;
with --chapter the one corpus is the chapter's (`_lda_example()`, the same family drawn with rng=0) and --offsets only
seeds its starts. Each start is one `lda_vb(..., n_init=1)` fit; its L1 ratio is the largest over topics of (L1 error of
the matched topic) / (the oracle's expected L1 error), as in the test. A ratio above 6 fails the test's bound. With
--starts S > 1 the S starts of a corpus come from one generator seeded 10_000 + off (a second one, 20_000 + off, for the
k-means starts of --init both), so that the ELBOs of the starts on one corpus can be compared: each start's gap is the
best final ELBO over all starts run on its corpus minus its own.
Prints one JSON line per corpus, then a summary per init: starts, bad starts (L1 ratio > 6) with their rate and a one-sided
95 % upper bound; with S > 1 also the starts that ended more than 5 nats below the best on their corpus, and the gaps.
"""
import argparse
import json
import warnings

import numpy as np
from scipy import stats

from bayesnotes.core import ConvergenceWarning
from bayesnotes.viconjugate import _lda_example, lda_corpus, lda_vb, match_topics


def ratio(fit, corpus):
    "Largest (L1 error of a matched topic) / (oracle's expected L1 error)."
    perm = match_topics(fit.topics, corpus.topics)
    true, n_k = corpus.topics[perm], corpus.z_counts.sum((0, 1))[perm]
    oracle = np.sqrt(2 * true * (1 - true) / (np.pi * n_k[:, None])).sum(1)
    return float((np.abs(fit.topics - true).sum(1) / oracle).max())


def upper95(k, n):
    "One-sided 95 % Clopper-Pearson upper bound on a rate with k events in n."
    return stats.beta.ppf(0.95, k + 1, n - k) if k < n else 1.0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--init", choices=("kmeans", "random", "both"), default="kmeans")
    ap.add_argument("--offsets", default="0:300", help="corpus offsets A:B")
    ap.add_argument("--starts", type=int, default=1, help="starts per corpus (of each init with --init both)")
    ap.add_argument("--chapter", action="store_true", help="the chapter's corpus instead of the test's")
    ap.add_argument("--n-iter", type=int, default=200, help="lda_vb's n_iter (its default: 200)")
    args = ap.parse_args(argv)
    a, b = (int(v) for v in args.offsets.split(":"))
    inits = ("random", "kmeans") if args.init == "both" else (args.init,)
    rows = {i: [] for i in inits}
    for off in range(a, b):
        corpus = (_lda_example() if args.chapter else
                  lda_corpus(n_docs=300, n_topics=4, n_vocab=30, doc_length=60, alpha=0.3, eta=0.1, rng=4 + off))
        out = {}
        for j, init in enumerate(inits):
            rng = 5 + off if args.starts == 1 else np.random.default_rng(10_000 * (j + 1) + off)  # 1 start: the test's seed
            out[init] = []
            for _ in range(args.starts):
                with warnings.catch_warnings():          # recorded per start instead (sweeps, converged)
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    fit = lda_vb(corpus.counts, 4, alpha=0.3, eta=0.1, n_iter=args.n_iter, init=init, rng=rng)
                out[init].append(dict(ratio=ratio(fit, corpus), elbo=float(fit.elbo[-1]), sweeps=int(fit.start_sweeps[0]),
                                      converged=bool(fit.converged)))
        best = max(r["elbo"] for v in out.values() for r in v)
        for init, v in out.items():
            for r in v:
                r["gap"] = best - r["elbo"]
            rows[init] += v
        print(json.dumps(dict(offset=off, starts=out)), flush=True)
    for init, v in rows.items():
        n, ratios, gaps = len(v), np.array([r["ratio"] for r in v]), np.array([r["gap"] for r in v])
        bad = ratios > 6
        line = (f"init={init}: {bad.sum()} of {n} starts with L1 ratio > 6 (rate {bad.mean():.4f}, 95 % upper bound "
                f"{upper95(bad.sum(), n):.4f})")
        if bad.any():
            line += f", their ratios {ratios[bad].min():.1f}-{ratios[bad].max():.1f}"
            if args.starts > 1:
                line += f" and gaps {gaps[bad].min():.1f}-{gaps[bad].max():.1f} nats"
        if args.starts > 1:
            far = gaps > 5
            line += (f"; {far.sum()} of {n} ended > 5 nats below the best start on their corpus (rate {far.mean():.3f}, "
                     f"95 % upper bound {upper95(far.sum(), n):.3f}); gaps: median {np.median(gaps):.1f}, "
                     f"largest {gaps.max():.1f} nats; largest L1 ratio of the starts within 5 nats "
                     f"{ratios[~far].max():.2f}")
        line += f"; {n - sum(r['converged'] for r in v)} of {n} starts stopped at n_iter = {args.n_iter}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
