"""Benchmark: bayesnotes.smc vs `particles` on three problems, in one run, rounds alternating between the libraries.

- bootstrap: the bootstrap particle filter on the 1-d linear-Gaussian model, T=100, N=10,000, systematic
  resampling when ESS < N/2; time in nanoseconds per particle per step;
- guided: the same with the locally optimal proposal (bayesnotes `guided_model`, particles `GuidedPF`);
- tempered: adaptive likelihood tempering (ESS 1/2 per step, standard resample-move with 5 random-walk Metropolis
  steps per move, proposal scale 2.38/sqrt(d) times the particles' covariance in both libraries) on N(0, I_5)
  times N(y | theta, 0.01 I_5), whose log Z is known in closed form; N=2,000; time in milliseconds per run.
For every problem: mean and sd of log Zhat - log Z over the runs (exact log Z: Kalman filter, closed form).

Usage (from the repository root):
    .venv/bin/python benchmarks/smc/run.py [--particles-python /tmp/particlesvenv/bin/python] [--rounds 5]
        [--problems bootstrap,guided,tempered]

`particles` pins numpy<2, so it lives in its own virtual environment, never in .venv:
    python3 -m venv /tmp/particlesvenv && /tmp/particlesvenv/bin/pip install particles
Not part of the test suite."""
import argparse, json, os, subprocess, sys, tempfile, time
import numpy as np
from scipy import stats
from bayesnotes.smc import LinearGaussianSSM, bootstrap_filter, guided_model, smc, tempered_smc

p = argparse.ArgumentParser()
p.add_argument("--particles-python", default="/tmp/particlesvenv/bin/python")
p.add_argument("--rounds", type=int, default=5)
p.add_argument("--reps", type=int, default=3, help="timed runs per library per round")
p.add_argument("--N", type=int, default=10_000, help="particles of the filters")
p.add_argument("--N-tempered", type=int, default=2_000, help="particles of the tempered sampler")
p.add_argument("--T", type=int, default=100)
p.add_argument("--problems", default="bootstrap,guided,tempered")
a = p.parse_args()
here, tmp = os.path.dirname(os.path.abspath(__file__)), tempfile.mkdtemp()

ssm = LinearGaussianSSM(A=0.9, C=1.0, Q=1.0, R=0.5, P0=1 / (1 - 0.81))
_, y = ssm.simulate(a.T, rng=2024)
d, s2 = 5, 0.01
yt = np.full(d, 1.5)
log_prior = lambda th: -0.5 * np.sum(th ** 2, axis=1) - 0.5 * d * np.log(2 * np.pi)
log_lik = lambda th: -0.5 * np.sum((yt - th) ** 2, axis=1) / s2 - 0.5 * d * np.log(2 * np.pi * s2)
prior_sample = lambda rng, N: rng.standard_normal((N, d))

PROBLEMS = {   # name: (data for particles, N, exact log Z, our run -> (log Zhat, resampling steps or temperatures))
    "bootstrap": (y[:, 0], a.N, ssm.kalman_filter(y).log_evidence,
                  lambda rng: (lambda r: (r.log_evidence, int(r.resampled.sum())))(bootstrap_filter(ssm, y, a.N, rng))),
    "guided": (y[:, 0], a.N, ssm.kalman_filter(y).log_evidence,
               lambda rng: (lambda r: (r.log_evidence, int(r.resampled.sum())))(smc(guided_model(ssm, y), a.N, rng))),
    "tempered": (np.r_[d, s2, yt], a.N_tempered, float(np.sum(stats.norm.logpdf(yt, 0, np.sqrt(1 + s2)))),
                 lambda rng: (lambda r: (r.log_evidence, r.n_steps))(tempered_smc(log_prior, log_lik, prior_sample,
                                                                                  a.N_tempered, rng))),
}
rng = np.random.default_rng(1)
for name in a.problems.split(","):
    data, N, log_z, run = PROBLEMS[name]
    path = os.path.join(tmp, f"{name}.npy"); np.save(path, data)
    run(0)   # warm-up
    ours, theirs, ll_ours, ll_theirs, rs_ours, rs_theirs = [], [], [], [], [], []
    for r in range(a.rounds):
        for _ in range(a.reps):
            t0 = time.perf_counter(); lz, rs = run(rng); ours.append(time.perf_counter() - t0)
            ll_ours.append(lz); rs_ours.append(rs)
        if os.path.exists(a.particles_python):
            out = subprocess.run([a.particles_python, os.path.join(here, "bench_particles.py"), name, path, str(N),
                                  str(a.reps)], capture_output=True, text=True, check=True).stdout
            dd = json.loads(out.strip().splitlines()[-1])
            theirs += dd["times"]; ll_theirs += dd["logliks"]; rs_theirs += dd["n_resampling"]
    unit, scale = ("ns/particle/step", 1e9 / (N * a.T)) if name != "tempered" else ("ms/run", 1e3)
    what = "resampling steps" if name != "tempered" else "tempering steps"
    def line(lib, ts, ll, rs):
        ts, err = np.array(ts) * scale, np.array(ll) - log_z
        return (f"  {lib}: median {np.median(ts):.0f} {unit} (min {ts.min():.0f}), {len(ts)} runs, "
                f"log Zhat - log Z mean {err.mean():+.3f} sd {err.std(ddof=1):.3f}, {what} {np.mean(rs):.1f}")
    print(f"{name}: N={N}, log Z = {log_z:.3f}")
    print(line("bayesnotes.smc", ours, ll_ours, rs_ours))
    if theirs:
        print(line(f"particles {dd['particles']} (numpy {dd['numpy']})", theirs, ll_theirs, rs_theirs))
        print(f"  ratio bayesnotes/particles (median times): {np.median(ours) / np.median(theirs):.2f}")
    else:
        print(f"  (particles not found at {a.particles_python}; see the docstring to install it)")
