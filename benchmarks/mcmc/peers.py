"""Peer NUTS runs (NumPyro and BlackJAX) for benchmarks/mcmc/run.py.

Runs in a SEPARATE virtual environment that has jax, numpyro and blackjax (they are not dependencies of
bayesnotes). Usage (normally called by run.py):

    python peers.py PROBLEM.npz OUT.npz [--chains 4 --warmup 1000 --draws 1000 --seed 0]

PROBLEM.npz holds `kind` ("gaussian" with `sd`, or "logistic" with `X`, `y`, `prior_scale`), written by run.py so
that every library samples exactly the same posterior. Two runs per library are made in the same process: the
first includes JIT compilation ("cold"), the second, with another seed, reuses the compiled code ("warm").
"""
import argparse
import time
import numpy as np


def logdensity_fn(problem):
    import jax.numpy as jnp
    if str(problem["kind"]) == "gaussian":
        sd = jnp.asarray(problem["sd"])
        return lambda x: -0.5 * jnp.sum((x / sd) ** 2)
    X, y, s = jnp.asarray(problem["X"]), jnp.asarray(problem["y"]), float(problem["prior_scale"])
    def logp(w):
        eta = X @ w
        return jnp.sum(y * eta - jnp.logaddexp(0.0, eta)) - 0.5 * jnp.sum(w ** 2) / s ** 2
    return logp


def run_numpyro(problem, chains, warmup, draws, seed):
    import jax
    import numpyro
    from numpyro.infer import MCMC, NUTS
    logp = logdensity_fn(problem)
    dim = int(problem["dim"])
    potential = lambda x: -logp(x)
    out = []
    # one MCMC object for both runs, so that the second run reuses the compiled sampler
    mcmc = MCMC(NUTS(potential_fn=potential), num_warmup=warmup, num_samples=draws, num_chains=chains,
                chain_method="vectorized", progress_bar=False)
    for rep in range(2):
        key = jax.random.PRNGKey(seed + rep)
        init = jax.random.uniform(jax.random.PRNGKey(100 + seed + rep), (chains, dim), minval=-2, maxval=2)
        t0 = time.perf_counter()
        mcmc.run(key, init_params=init, extra_fields=("num_steps", "diverging"))
        x = np.asarray(mcmc.get_samples(group_by_chain=True))
        steps = np.asarray(mcmc.get_extra_fields(group_by_chain=True)["num_steps"])
        div = np.asarray(mcmc.get_extra_fields(group_by_chain=True)["diverging"])
        out.append(dict(draws=x, n_grad=steps.sum(), divergences=div.sum(), seconds=time.perf_counter() - t0))
    return out


def run_blackjax(problem, chains, warmup, draws, seed):
    import jax
    import jax.numpy as jnp
    import blackjax
    logp = logdensity_fn(problem)
    dim = int(problem["dim"])

    def one_chain(key, x0):
        k_warm, k_draw = jax.random.split(key)
        warm = blackjax.window_adaptation(blackjax.nuts, logp)
        (state, params), _ = warm.run(k_warm, x0, num_steps=warmup)
        kernel = blackjax.nuts(logp, **params).step
        def body(s, k):
            s, info = kernel(k, s)
            return s, (s.position, info.num_integration_steps, info.is_divergent)
        _, (pos, steps, div) = jax.lax.scan(body, state, jax.random.split(k_draw, draws))
        return pos, steps, div

    run = jax.jit(jax.vmap(one_chain))
    out = []
    for rep in range(2):
        keys = jax.random.split(jax.random.PRNGKey(seed + rep), chains)
        init = jax.random.uniform(jax.random.PRNGKey(100 + seed + rep), (chains, dim), minval=-2, maxval=2)
        t0 = time.perf_counter()
        pos, steps, div = run(keys, init)
        pos.block_until_ready()
        out.append(dict(draws=np.asarray(pos), n_grad=np.asarray(steps).sum(), divergences=np.asarray(div).sum(),
                        seconds=time.perf_counter() - t0))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("problem"); ap.add_argument("out")
    ap.add_argument("--chains", type=int, default=4); ap.add_argument("--warmup", type=int, default=1000)
    ap.add_argument("--draws", type=int, default=1000); ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    import jax
    jax.config.update("jax_enable_x64", True)           # same float64 arithmetic as numpy
    problem = dict(np.load(a.problem, allow_pickle=False))
    res = {}
    for name, fn in (("numpyro", run_numpyro), ("blackjax", run_blackjax)):
        for rep, r in enumerate(fn(problem, a.chains, a.warmup, a.draws, a.seed)):
            tag = f"{name}_{'cold' if rep == 0 else 'warm'}"
            for k, v in r.items():
                res[f"{tag}__{k}"] = v
    np.savez(a.out, **res)


if __name__ == "__main__":
    main()
