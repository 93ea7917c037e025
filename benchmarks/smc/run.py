"""Benchmark: bootstrap particle filter on the 1-d linear-Gaussian model, T=100, N=10,000, systematic resampling
when ESS < N/2, in nanoseconds per particle per step: bayesnotes.smc vs `particles`.

Usage (from the repository root):
    .venv/bin/python benchmarks/smc/run.py [--particles-python /tmp/particlesvenv/bin/python] [--rounds 5]

`particles` pins numpy<2, so it lives in its own virtual environment, never in .venv:
    python3 -m venv /tmp/particlesvenv && /tmp/particlesvenv/bin/pip install particles
Rounds alternate between the two libraries so that load on a shared machine affects both alike.
Not part of the test suite."""
import argparse, json, os, subprocess, sys, tempfile, time
import numpy as np
from bayesnotes.smc import LinearGaussianSSM, bootstrap_filter

p = argparse.ArgumentParser()
p.add_argument("--particles-python", default="/tmp/particlesvenv/bin/python")
p.add_argument("--rounds", type=int, default=5)
p.add_argument("--reps", type=int, default=3, help="timed runs per library per round")
p.add_argument("--N", type=int, default=10_000)
p.add_argument("--T", type=int, default=100)
a = p.parse_args()

ssm = LinearGaussianSSM(A=0.9, C=1.0, Q=1.0, R=0.5, P0=1 / (1 - 0.81))
_, y = ssm.simulate(a.T, rng=2024)
log_evidence = ssm.kalman_filter(y).log_evidence
data = os.path.join(tempfile.mkdtemp(), "y.npy"); np.save(data, y[:, 0])
here = os.path.dirname(os.path.abspath(__file__))

bootstrap_filter(ssm, y, a.N, 0)  # warm-up
ours, theirs, ll_ours, ll_theirs, rs_ours, rs_theirs = [], [], [], [], [], []
rng = np.random.default_rng(1)
for r in range(a.rounds):
    for _ in range(a.reps):
        t0 = time.perf_counter(); res = bootstrap_filter(ssm, y, a.N, rng); ours.append(time.perf_counter() - t0)
        ll_ours.append(res.log_evidence); rs_ours.append(int(res.resampled.sum()))
    if os.path.exists(a.particles_python):
        out = subprocess.run([a.particles_python, os.path.join(here, "bench_particles.py"), data, str(a.N), str(a.reps)],
                             capture_output=True, text=True, check=True).stdout
        d = json.loads(out.strip().splitlines()[-1])
        theirs += d["times"]; ll_theirs += d["logliks"]; rs_theirs += d["n_resampling"]

ns = lambda ts: np.array(ts) / (a.N * a.T) * 1e9
print(f"T={a.T}, N={a.N}, systematic resampling when ESS < N/2; log Z (Kalman) = {log_evidence:.3f}")
print(f"bayesnotes.smc: median {np.median(ns(ours)):.0f} ns/particle/step (min {ns(ours).min():.0f}), "
      f"{len(ours)} runs, mean log Zhat {np.mean(ll_ours):.3f}, resampling steps {np.mean(rs_ours):.1f}")
if theirs:
    print(f"particles {d['particles']} (numpy {d['numpy']}): median {np.median(ns(theirs)):.0f} ns/particle/step "
          f"(min {ns(theirs).min():.0f}), {len(theirs)} runs, mean log Zhat {np.mean(ll_theirs):.3f}, "
          f"resampling steps {np.mean(rs_theirs):.1f}")
    print(f"ratio bayesnotes/particles (medians): {np.median(ours) / np.median(theirs):.2f}")
else:
    print(f"(particles not found at {a.particles_python}; see the docstring to install it)")
