"""Time the bootstrap filter of `particles` (Chopin) on given data. Run with the python of a separate venv
that has `particles` installed (it pins numpy<2); prints one JSON line.

    python bench_particles.py DATA.npy N REPS
"""
import json, sys, time
import numpy as np
import particles
from importlib.metadata import version
from particles import kalman, state_space_models as ssms

y = np.load(sys.argv[1])
N, reps = int(sys.argv[2]), int(sys.argv[3])
# x_0 ~ N(0, 1/(1-0.81)) (sigma0=None gives the stationary law), x_t = 0.9 x_{t-1} + N(0, 1), y_t = x_t + N(0, 0.5)
ssm = kalman.LinearGauss(sigmaX=1.0, sigmaY=np.sqrt(0.5), rho=0.9)
fk = ssms.Bootstrap(ssm=ssm, data=list(y))
particles.SMC(fk=fk, N=N, resampling="systematic", ESSrmin=0.5).run()   # warm-up: numba compiles inverse_cdf
times, logliks, n_rs = [], [], []
for _ in range(reps):
    pf = particles.SMC(fk=fk, N=N, resampling="systematic", ESSrmin=0.5)
    t0 = time.perf_counter(); pf.run(); times.append(time.perf_counter() - t0)
    logliks.append(float(pf.logLt)); n_rs.append(int(np.sum(pf.summaries.rs_flags)))
print(json.dumps({"times": times, "logliks": logliks, "n_resampling": n_rs,
                  "numpy": np.__version__, "particles": version("particles")}))
