"""How often does one CAVI start of `lda_vb` end in a worse local optimum? (the measurement behind 01d's text and
tests/test_viconjugate.py::test_lda_elbo_monotone_and_recovery)

    python tools/lda_local_optima.py --init kmeans --offsets 0:300              # one start per corpus
    python tools/lda_local_optima.py --init random --offsets 100:125 --starts 8 # 8 starts per corpus

Corpus `off` is the test's: `lda_corpus(300 documents, K = 4, V = 30, 60 words, alpha = 0.3, eta = 0.1, rng=4 + off)`.
Each start is one `lda_vb(..., n_init=1)` fit; its L1 ratio is the largest over topics of (L1 error of the matched topic)
/ (the oracle's expected L1 error), as in the test. A ratio above 6 fails the test's bound. With --starts S > 1 the S
starts of a corpus come from one generator seeded 10_000 + off, so that the ELBOs of the starts on one corpus can be
compared (a bad start ends at a lower ELBO than the good ones: the restarts of `n_init` then pick a good one).
Prints one JSON line per corpus, then the summary: starts, bad starts, their rate with a one-sided 95 % upper bound.
"""
import argparse
import json

import numpy as np
from scipy import stats

from bayesnotes.viconjugate import lda_corpus, lda_vb, match_topics


def ratio(fit, corpus):
    "Largest (L1 error of a matched topic) / (oracle's expected L1 error)."
    perm = match_topics(fit.topics, corpus.topics)
    true, n_k = corpus.topics[perm], corpus.z_counts.sum((0, 1))[perm]
    oracle = np.sqrt(2 * true * (1 - true) / (np.pi * n_k[:, None])).sum(1)
    return float((np.abs(fit.topics - true).sum(1) / oracle).max())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--init", choices=("kmeans", "random"), default="kmeans")
    ap.add_argument("--offsets", default="0:300", help="corpus offsets A:B")
    ap.add_argument("--starts", type=int, default=1, help="starts per corpus")
    args = ap.parse_args(argv)
    a, b = (int(v) for v in args.offsets.split(":"))
    n_bad = n = 0
    for off in range(a, b):
        corpus = lda_corpus(n_docs=300, n_topics=4, n_vocab=30, doc_length=60, alpha=0.3, eta=0.1, rng=4 + off)
        rng = 5 + off if args.starts == 1 else np.random.default_rng(10_000 + off)   # 1 start: the test's seed
        rows = []
        for _ in range(args.starts):
            fit = lda_vb(corpus.counts, 4, alpha=0.3, eta=0.1, init=args.init, rng=rng)
            rows.append(dict(ratio=ratio(fit, corpus), elbo=float(fit.elbo[-1]), sweeps=len(fit.elbo) - 1))
        n += len(rows)
        n_bad += sum(r["ratio"] > 6 for r in rows)
        print(json.dumps(dict(offset=off, starts=rows)), flush=True)
    upper = stats.beta.ppf(0.95, n_bad + 1, n - n_bad) if n_bad < n else 1.0     # Clopper-Pearson, one-sided
    print(f"init={args.init}: {n_bad} of {n} starts with L1 ratio > 6 (rate {n_bad / n:.4f}, 95 % upper bound {upper:.4f})")


if __name__ == "__main__":
    main()
