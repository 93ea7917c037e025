"""Full-length version of the BNN chapter's regression benchmark (not part of `make test`).

The notebook (nbs/07_bnn.ipynb) runs 5 random 90/10 splits of scikit-learn's diabetes data to stay fast; this
script runs the 20 splits of the protocol of Gal & Ghahramani used in [@cinelli2021variational, sec. 4.7.3]
(without the Bayesian-optimisation search over hyper-parameters) and prints the same table, with standard
errors corrected for the overlap of the training sets (Nadeau & Bengio, 2003).

Usage:  .venv/bin/python benchmarks/bnn/diabetes_splits.py [n_splits] [rng]   (rng: an int seed)
"""
import sys
import time

from bayesnotes.bnn import load_diabetes_data, regression_benchmark, format_table


def main(n_splits: int = 20, rng: int = 0):
    X, y = load_diabetes_data()
    t0 = time.time()
    res = regression_benchmark(X, y, n_splits=n_splits, rng=rng, progress=True)
    print(f"diabetes (n = {len(y)}, d = {X.shape[1]}), {n_splits} random 90/10 splits, rng {rng}, "
          f"{time.time() - t0:.0f} s wall; mean ± corrected standard error over splits\n")
    print(format_table(res.summary(), digits=2))


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
