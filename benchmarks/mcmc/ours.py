"""One bayesnotes NUTS run for benchmarks/mcmc/run.py, in a fresh process (a cold start, like the peers' first run).

    python ours.py PROBLEM.npz OUT.npz --root REPO --gradient {closed,autograd} --seed S [--chains 4 ...]

`--root` is the source tree whose `bayesnotes` is imported: the working tree for "after", a `git worktree` of an
older commit for "before" (the imports work with both layouts: `bayesnotes.targets`, or `bayesnotes.core` in trees
before the foundations were split). `--gradient autograd` samples the same log density written with autograd.numpy
(what a reader's own model gets); `closed` uses the library's closed-form batched gradient
(`targets.logistic_regression`, `targets.gaussian_target`), which needs a tree that has it. Starts are uniform in [-2, 2]^d from the seed, as for the
peers. Records the wall and CPU seconds of the `sample` call, every gradient row evaluated (warm-up included) and
the load average before and after.
"""
import argparse
import os
import sys
import time

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("problem"); ap.add_argument("out")
    ap.add_argument("--root", required=True); ap.add_argument("--gradient", choices=("closed", "autograd"), required=True)
    ap.add_argument("--chains", type=int, default=4); ap.add_argument("--warmup", type=int, default=1000)
    ap.add_argument("--draws", type=int, default=1000); ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    sys.path.insert(0, os.path.abspath(a.root))
    import autograd.numpy as anp
    import bayesnotes
    try:                                   # the targets have their own module since the foundations were split
        from bayesnotes import targets as models
    except ImportError:                    # older trees: everything in core
        from bayesnotes import core as models
    Target = models.Target
    from bayesnotes.mcmc import sample
    assert os.path.dirname(bayesnotes.__file__).startswith(os.path.abspath(a.root)), bayesnotes.__file__
    pr = dict(np.load(a.problem, allow_pickle=False))
    if str(pr["kind"]) == "gaussian":
        sd = pr["sd"]
        if a.gradient == "closed":
            target = models.gaussian_target(sd=sd)
        else:
            target = Target(lambda x: -0.5 * anp.sum((x / sd) ** 2, axis=-1), sd.size, batched=True)
    else:
        X, y, s = pr["X"], pr["y"], float(pr["prior_scale"])
        target = models.logistic_regression(X, y, s)
        if a.gradient == "autograd" and getattr(target, "closed_form", False):
            target = target.with_autograd()
        if a.gradient == "closed" and not getattr(target, "closed_form", False):
            raise SystemExit("this tree has no closed-form gradient")
    if hasattr(target, "taped"):           # what `sample` does (a tape recorded once per run for autograd targets)
        target = target.taped()            # taping a taped target returns it, so `sample` sees this very object
    rows = {"n": 0}
    inner = target.value_and_grad_batch
    def counting(Xb):
        rows["n"] += len(Xb)
        return inner(Xb)
    target.value_and_grad_batch = counting
    rng = np.random.default_rng(1000 + a.seed)
    x0 = rng.uniform(-2, 2, size=(a.chains, target.dim))
    load0 = os.getloadavg()[0]
    t0, c0 = time.perf_counter(), time.process_time()
    res = sample("nuts", target, x0, a.warmup, a.draws, a.chains, rng=a.seed)
    sec, cpu = time.perf_counter() - t0, time.process_time() - c0
    np.savez(a.out, draws=res.draws, n_grad=res.stats.n_grad.sum(), divergences=res.stats.divergent.sum(),
             seconds=sec, cpu_seconds=cpu, n_grad_total=rows["n"], load=[load0, os.getloadavg()[0]])


if __name__ == "__main__":
    main()
