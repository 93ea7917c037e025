"""Time `particles` (Chopin) on the problems of run.py. Run with the python of a separate venv that has
`particles` installed (it pins numpy<2); prints one JSON line.

    python bench_particles.py PROBLEM DATA.npy N REPS

PROBLEM: bootstrap (bootstrap filter) or guided (locally optimal proposal) on the 1-d linear-Gaussian model with
data DATA.npy, or tempered (adaptive tempering, standard resample-move: wastefree=False, 5 random-walk steps per
move) on the conjugate Gaussian target whose parameters DATA.npy holds as [d, s2, y_1..y_d].
"""
import json, sys, time
import numpy as np
import particles
from importlib.metadata import version
from particles import distributions as dists, kalman, smc_samplers, state_space_models as ssms

problem, data = sys.argv[1], np.load(sys.argv[2])
N, reps = int(sys.argv[3]), int(sys.argv[4])
if problem in ("bootstrap", "guided"):
    # x_0 ~ N(0, 1/(1-0.81)) (sigma0=None gives the stationary law), x_t = 0.9 x_{t-1} + N(0, 1), y_t = x_t + N(0, 0.5)
    ssm = kalman.LinearGauss(sigmaX=1.0, sigmaY=np.sqrt(0.5), rho=0.9)
    FK = ssms.Bootstrap if problem == "bootstrap" else ssms.GuidedPF      # GuidedPF: LinearGauss.proposal, the optimal one
    def make(): return particles.SMC(fk=FK(ssm=ssm, data=list(data)), N=N, resampling="systematic", ESSrmin=0.5)
else:
    d, s2, y = int(data[0]), float(data[1]), data[2:]
    class Bridge(smc_samplers.TemperingBridge):
        def logtarget(self, theta):      # N(0, I) prior times N(y | theta, s2 I)
            return (-0.5 * np.sum(theta ** 2, axis=1) - 0.5 * d * np.log(2 * np.pi)
                    - 0.5 * np.sum((y - theta) ** 2, axis=1) / s2 - 0.5 * d * np.log(2 * np.pi * s2))
    bridge = Bridge(base_dist=dists.MvNormal(loc=np.zeros(d), cov=np.eye(d)))
    def make(): return particles.SMC(fk=smc_samplers.AdaptiveTempering(model=bridge, wastefree=False, len_chain=6,
                                                                      ESSrmin=0.5), N=N, resampling="systematic")
make().run()   # warm-up: numba compiles inverse_cdf
times, logliks, n_rs = [], [], []
for _ in range(reps):
    pf = make()
    t0 = time.perf_counter(); pf.run(); times.append(time.perf_counter() - t0)
    logliks.append(float(pf.logLt)); n_rs.append(int(np.sum(pf.summaries.rs_flags)) if problem != "tempered" else pf.t)
print(json.dumps({"times": times, "logliks": logliks, "n_resampling": n_rs,
                  "numpy": np.__version__, "particles": version("particles")}))
