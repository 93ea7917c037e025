"""The tape (`bayesnotes.targets.Tape`): autograd's graph recorded once and replayed. Every plain-numpy VJP against
autograd's own on random inputs with broadcasting; the replayer's schedule of checks; and samplers giving the same
draws with and without it. All comparisons are exact identities up to floating-point rounding (no statistics)."""
import numpy as np
import pytest

import autograd.numpy as anp
from autograd import grad

from bayesnotes import targets
from bayesnotes.targets import Tape, Target, Untraceable, logistic_regression
from bayesnotes.datasets import load_breast_cancer
from bayesnotes.mcmc import sample
from bayesnotes.vi import advi


def _check(f, z, n_fast_at_least=1):
    """The tape's value and gradient of a scalar f at z equal autograd's to rounding. (Not bit for bit: numpy computes
    a scalar's `v**2` with libm's pow and an array's as v*v, which differ in the last bit for some v, e.g. at seed
    offset 105 of the sweep; the replay runs on arrays.)"""
    tape = Tape(f, z)
    assert tape.n_fast >= n_fast_at_least          # the plain-numpy VJP under test was used, not autograd's
    v, g = tape(z)
    assert np.allclose(v, f(z), rtol=1e-14, atol=1e-14)
    assert np.allclose(g, grad(f)(z), rtol=1e-12, atol=1e-14)


# (name, function of one or two arrays, domain): every entry of the plain-numpy VJP table
UNARY = [(anp.negative, "any"), (anp.exp, "any"), (anp.log, "pos"), (anp.log1p, "pos"), (anp.expm1, "any"),
         (anp.sqrt, "pos"), (anp.square, "any"), (anp.tanh, "any"), (anp.sin, "any"), (anp.cos, "any")]
BINARY = [anp.add, anp.subtract, anp.multiply, anp.divide, anp.logaddexp, anp.power]
SHAPES = [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((4,), (3, 4)), ((3, 4), ()), ((), (2, 3))]


def test_every_plain_numpy_vjp_of_the_table_is_tested():
    tested = {f.fun for f, _ in UNARY} | {f.fun for f in BINARY}
    assert tested == set(targets._ELEMENTWISE_VJPS)


@pytest.mark.parametrize("prim,domain", UNARY, ids=lambda p: getattr(p, "__name__", str(p)))
def test_unary_vjps_match_autograd(prim, domain, seed):
    rng = np.random.default_rng(seed(0))
    W = rng.normal(size=(3, 4))                                 # a random cotangent through the weighted sum
    x = rng.uniform(0.2, 2.0, (3, 4)) if domain == "pos" else rng.normal(size=(3, 4))
    _check(lambda z: anp.sum(prim(z) * W), x, 3)


@pytest.mark.parametrize("prim", BINARY, ids=lambda p: p.__name__)
@pytest.mark.parametrize("sa,sb", SHAPES)
def test_binary_vjps_match_autograd_with_broadcasting(prim, sa, sb, seed):
    rng = np.random.default_rng(seed(1))
    na, nb = int(np.prod(sa)), int(np.prod(sb))
    W = rng.normal(size=np.broadcast_shapes(sa, sb))
    z = rng.uniform(0.5, 2.0, na + nb)                          # positive: a valid base and divisor for every entry
    def f(z):                                                   # both operands traced
        a, b = anp.reshape(z[:na], sa), anp.reshape(z[na:], sb)
        return anp.sum(prim(a, b) * W)
    if prim is anp.power:                                       # a traced exponent: autograd's own VJP serves both
        _check(lambda z: anp.sum(prim(anp.reshape(z[:na], sa), 1.7) * W), z)
        tape = Tape(f, z)
        assert np.allclose(tape(z)[1], grad(f)(z), rtol=1e-12, atol=1e-14)
    else:
        _check(f, z, 3)


@pytest.mark.parametrize("axis,keepdims", [(None, False), (0, False), (1, False), (-1, True), ((0, 2), False), ((0, 2), True)])
def test_sum_vjp_matches_autograd(axis, keepdims, seed):
    rng = np.random.default_rng(seed(2))
    x = rng.normal(size=(2, 3, 4))
    W = rng.normal(size=np.sum(x, axis=axis, keepdims=keepdims).shape)
    _check(lambda z: anp.sum(anp.sum(z, axis=axis, keepdims=keepdims) * W), x, 2)


@pytest.mark.parametrize("prim", [anp.dot, anp.matmul], ids=["dot", "matmul"])
@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,))])
def test_matrix_product_vjps_match_autograd(prim, sa, sb, seed):
    rng = np.random.default_rng(seed(3))
    na, nb = int(np.prod(sa)), int(np.prod(sb))
    W = rng.normal(size=np.dot(np.ones(sa), np.ones(sb)).shape)
    z = rng.normal(size=na + nb)
    _check(lambda z: anp.sum(prim(anp.reshape(z[:na], sa), anp.reshape(z[na:], sb)) * W), z, 2)


def test_replay_checks_against_autograd_at_the_recording_and_at_replays_1_2_4_8(monkeypatch):
    calls = []
    plain = targets._autograd_ones
    monkeypatch.setattr(targets, "_autograd_ones", lambda f, x: calls.append(1) or plain(f, x))
    t = Target(lambda x: -0.5 * anp.sum(x**2, axis=-1), 3, batched=True).taped()
    X = np.ones((2, 3))
    for n in range(1, 21):
        v, g = t.value_and_grad_batch(X * n)
        assert np.allclose(g, -X * n)
    # calls 1-2 plain; the tape is recorded at call 3 and checked there and at replays 1, 2, 4, 8, 16 (calls 4, 5,
    # 7, 11, 19): 2 + 6 autograd calls in 20
    assert len(calls) == 8


def test_nuts_gives_the_same_draws_with_and_without_the_tape(seed):
    X, y = load_breast_cancer()
    ag = logistic_regression(X[:120, :6], y[:120]).with_autograd()
    draws = [sample("nuts", Target(ag.fn, ag.dim, batched=True, tape=tape), n_warmup=30, n_draws=30, n_chains=4,
                    rng=seed(4)).draws for tape in (True, False)]
    # the forward passes are identical; gradients may differ in the last bits, which 60 transitions do not amplify
    assert np.allclose(draws[0], draws[1], rtol=1e-9, atol=1e-12)


def test_advi_gives_the_same_fit_with_and_without_the_tape(seed):
    "advi tapes its target for the run as the samplers do; 300 Adam steps from the same draws end at the same q."
    X, y = load_breast_cancer()
    ag = logistic_regression(X[:120, :6], y[:120]).with_autograd()
    fits = [advi(Target(ag.fn, ag.dim, batched=True, tape=tape), family="meanfield", n_iter=300, tol_rel_obj=None,
                 rng=seed(5)).q for tape in (True, False)]
    assert np.allclose(fits[0].params, fits[1].params, rtol=1e-9, atol=1e-12)


def test_a_density_that_branches_on_values_samples_with_plain_autograd(seed):
    def logp(x):                                               # a Laplace-like tail on one side, by a Python branch
        return -0.5 * anp.sum(x**2) if x[0] > 0 else -0.5 * anp.sum(x[1:]**2) + 2 * x[0]
    with pytest.raises(Untraceable):
        Tape(logp, np.ones(2))
    runs = [sample("hmc", Target(logp, 2, tape=tape), n_warmup=20, n_draws=20, n_chains=2, rng=seed(5)).draws
            for tape in (True, False)]
    assert np.array_equal(runs[0], runs[1])


def test_the_autograd_internals_the_tape_uses_exist():
    "An autograd upgrade that moves one of these fails here by name (samplers would quietly fall back to autograd)."
    import importlib
    import autograd
    used = {"autograd.core": ["VJPNode", "add_outgrads", "primitive_vjps", "sparse_object_types"],
            "autograd.numpy.numpy_boxes": ["ArrayBox"], "autograd.builtins": ["SequenceBox"],
            "autograd.tracer": ["Node", "box_type_mappings", "notrace_primitives", "trace"],
            "autograd.util": ["toposort"]}
    for module, names in used.items():
        for name in names:
            assert hasattr(importlib.import_module(module), name), f"autograd {autograd.__version__}: {module}.{name}"
    assert targets._TAPE_INTERNALS
    from autograd.numpy.numpy_boxes import ArrayBox
    assert "__bool__" in dir(ArrayBox)      # recording swaps it to refuse value-dependent control flow
    # autograd asks notrace_primitives[node type] about every primitive before running it: the recorder counts the
    # primitives begun there and those that returned (a difference is an exception caught inside f)
    with targets._recording() as seen:
        targets.trace(targets._Recorded.new_root(), lambda z: anp.sum(anp.exp(z) * 2.0), np.ones(3))
    assert seen.begun == seen.ended and sum(seen.begun.values()) == 3


def test_primitives_with_tuple_values_replay_through_autograds_vjps(seed):
    "slogdet and eigh return tuples; their parts are used several times, so gradients add in autograd's vector space."
    rng = np.random.default_rng(seed(6))
    A = rng.normal(size=(3, 3)); A = A @ A.T + 3 * np.eye(3)
    def f(x):
        s, ld = anp.linalg.slogdet(A * anp.exp(x[0]))
        w, V = anp.linalg.eigh(A * x[1]**2)
        return ld + anp.sum(w) + w[0] * w[1] + anp.sum(V[:, 0]**2) + anp.sum(x**2)
    tape = Tape(f, np.array([0.3, 1.2]))
    assert not tape.static                     # a tuple has no single shape: broadcasting is resolved at every replay
    for _ in range(3):
        x = rng.normal(size=2) * 0.5 + np.array([0.0, 1.0])
        v, g = tape(x)
        assert np.allclose(v, f(x), rtol=1e-14, atol=1e-14) and np.allclose(g, grad(f)(x), rtol=1e-12, atol=1e-13)


# A log density that uses try/except as control flow: a correlation r = x[0] outside (-1, 1) makes the 2 x 2 matrix
# indefinite, numpy's Cholesky raises and the density takes its `except` branch (a penalty that still depends on x,
# so a recording on that branch is not refused for an output independent of the input).
def _corr_density(x):
    S = anp.array([[1.0, x[0]], [x[0], 1.0]]) * 1.0
    try:
        L = anp.linalg.cholesky(S)
        z = anp.linalg.solve(L, x[1:])
        return -0.5 * anp.sum(z**2) - anp.sum(anp.log(anp.diag(L))) - 2.0 * x[0]**2
    except np.linalg.LinAlgError:
        _EXCEPT_CALLS[0] += 1                   # counted, so that a test can tell the branch was taken
        return -1e3 - 10.0 * x[0]**2

_EXCEPT_CALLS = [0]


def _errstate_density(x):
    "The same pattern with floating-point errors made to raise inside f: the replay runs under the caller's errstate."
    with np.errstate(invalid="raise", divide="raise"):
        try:
            return anp.sum(anp.log(x)) - anp.sum(x)
        except FloatingPointError:
            return -1e3 - anp.sum(x**2)


def _warnings_density(x):
    "...and with numpy's RuntimeWarning made an error inside f (a filter the replay does not see)."
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        try:
            return anp.sum(anp.log(x)) - anp.sum(x)
        except RuntimeWarning:
            return -1e3 - anp.sum(x**2)


def _inside(f):
    "A point on the `try` branch of each density above."
    return np.array([0.3, 0.5, -0.2]) if f is _corr_density else np.array([0.5, 1.5, 2.0])


def _outside(f, rng):
    "A random point on the `except` branch."
    if f is _corr_density:
        return np.array([rng.choice([-1, 1]) * rng.uniform(1.1, 2.0), *rng.normal(size=2)])
    return np.abs(rng.normal(size=3)) * np.where(np.arange(3) == rng.integers(3), -1.0, 1.0)


def _plain(f, x):
    "Value and gradient by a fresh autograd trace (what the target gives with tape=False)."
    return Target(f, 3, tape=False).value_and_grad(x)


DENSITIES = [_corr_density, _errstate_density, _warnings_density]


@pytest.mark.parametrize("f", DENSITIES, ids=lambda f: f.__name__)
def test_a_density_with_try_except_gives_autograds_values_under_the_tape(f, seed):
    """Recorded on the try branch, then evaluated on both branches in a random order: every call gives autograd's
    value and gradient. Catches a replay that raises (LinAlgError) or keeps the try branch (nan or a wrong value where
    f's own errstate or warnings filter would have raised)."""
    import warnings
    rng = np.random.default_rng(seed(7))
    t = Target(f, 3).taped()
    near = lambda: _inside(f) + rng.uniform(0, 0.2, 3)
    # calls 1-2 plain, 3 recorded, replays 1-2 checked (all on the try branch); replay 3, unchecked, leaves it
    xs = [_inside(f)] * 3 + [near(), near(), _outside(f, rng)] + [near() if rng.random() < 0.5 else _outside(f, rng)
                                                                 for _ in range(30)]
    with warnings.catch_warnings(), np.errstate(divide="warn", invalid="warn"):   # numpy's defaults, stated
        warnings.simplefilter("ignore", RuntimeWarning)   # the replayer's warning when it falls back
        for x in xs:
            v, g = t.value_and_grad(x)
            v0, g0 = _plain(f, x)
            assert v == v0 and np.allclose(g, g0, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("f", DENSITIES, ids=lambda f: f.__name__)
def test_a_recording_that_takes_an_except_branch_is_refused_and_never_replayed(f, seed):
    """Recorded where f's try block raised and f caught it: the tape is refused, and the taped target gives autograd's
    value at every later call. The old replayer kept the except branch between its checks (replays 3, 5-7, 9-15...)."""
    rng = np.random.default_rng(seed(8))
    bad = _outside(f, rng)
    with np.errstate(divide="warn", invalid="warn"):           # numpy's defaults, stated
        with pytest.raises(Untraceable, match="raised on the traced input"):
            Tape(f, bad)
        t = Target(f, 3).taped()
        for x in [_inside(f)] * 2 + [bad] * 3 + [_inside(f) + rng.uniform(0, 0.2, 3) for _ in range(20)]:
            assert t.value_and_grad(x)[0] == _plain(f, x)[0]


@pytest.mark.parametrize("f", DENSITIES[1:], ids=lambda f: f.__name__)
def test_a_density_that_makes_floating_point_errors_raise_is_not_recorded(f):
    "Even where its try block succeeds: the replay runs under the caller's errstate and filters, not under f's."
    with np.errstate(divide="warn", invalid="warn"), pytest.raises(Untraceable, match="floating-point errors raise"):
        Tape(f, _inside(f))


def test_a_refused_truth_value_caught_by_the_density_is_still_refused():
    "A bare `except` around value-dependent control flow would swallow the recorder's refusal and record the except branch."
    def sneaky(x):
        try:
            return anp.sum(x**2) if x[0] > 0 else anp.sum(x)
        except Exception:
            return anp.sum(x**3)
    with pytest.raises(Untraceable):
        Tape(sneaky, np.ones(2))
    t = Target(sneaky, 2).taped()
    for x in [np.ones(2)] * 3 + [np.array([0.5, 2.0])] * 5:
        assert np.allclose(t.grad(x), 2 * x)


def test_a_replay_that_raises_falls_back_to_autograd_for_the_rest_of_the_run(monkeypatch):
    "Recorded on the try branch; a replay whose Cholesky fails warns, returns autograd's answer and stops replaying."
    t = Target(_corr_density, 3).taped()
    good, bad = _inside(_corr_density), np.array([1.5, 0.2, -0.3])
    for _ in range(3):
        t.value_and_grad(good)                     # plain, plain, recorded (on the try branch)
    with pytest.warns(RuntimeWarning, match="raised LinAlgError"):
        v, g = t.value_and_grad(bad)               # replay 1
    v0, g0 = _plain(_corr_density, bad)
    assert v == v0 and np.allclose(g, g0)
    replays = []
    monkeypatch.setattr(Tape, "__call__", lambda self, x: replays.append(1))
    for x in (good, bad, good):
        assert t.value_and_grad(x)[0] == _plain(_corr_density, x)[0]
    assert not replays                             # plain autograd from here on


def test_hmc_on_a_try_except_density_gives_the_same_draws_with_and_without_the_tape(seed):
    """The public sampler, started near r = +-0.9 so that leapfrog steps cross |r| = 1 and the density's except branch
    answers: the draws are those of plain autograd (the old replayer raised LinAlgError here at every seed tried)."""
    import warnings
    x0 = np.array([[0.9, 0.0, 0.0], [-0.9, 0.5, -0.5]])
    runs = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # the replayer's fallback; autograd's "output independent of input"
        for tape in (True, False):
            _EXCEPT_CALLS[0] = 0
            runs.append(sample("hmc", Target(_corr_density, 3, tape=tape), x0=x0, n_warmup=0, n_draws=20, n_chains=2,
                               adapt=False, step_size=0.3, n_steps=5, rng=seed(9)).draws)
            assert _EXCEPT_CALLS[0] > 0
    assert np.allclose(runs[0], runs[1], rtol=1e-9, atol=1e-12)


def test_unpacking_and_iterating_over_traced_values_are_recorded(seed):
    """Python iterates over a box by indexing until IndexError, an exception raised and caught inside f: the recorder
    iterates up to the length instead, so these common densities keep the tape (and autograd's boxes are restored)."""
    from autograd.builtins import SequenceBox
    from autograd.numpy.numpy_boxes import ArrayBox
    rng = np.random.default_rng(seed(10))
    A = rng.normal(size=(3, 3)); A = A @ A.T + np.eye(3)
    def f(x):
        mu, log_s = x[:2]                                  # unpacking an array
        s, logdet = anp.linalg.slogdet(A * anp.exp(x[2]))   # unpacking a tuple
        return sum(xi**2 for xi in x) - ((mu - 1) / anp.exp(log_s))**2 + logdet
    z = rng.normal(size=3)
    tape = Tape(f, z)
    assert np.allclose(tape(z)[0], f(z), rtol=1e-14, atol=1e-14) and np.allclose(tape(z)[1], grad(f)(z), rtol=1e-12, atol=1e-13)
    assert "__iter__" not in vars(ArrayBox) and "__iter__" not in vars(SequenceBox)


# ---------------------------------------------------------------- review 00_foundations
def test_taping_a_taped_target_starts_a_fresh_replayer():
    """Old code returned the same target with the same replayer: a second run replayed the first run's tape (30 of 40
    calls stale). The target itself is still returned (the MCMC chapter's profiler patches it before `sample` tapes it)."""
    state = {"s": 1.0}
    t = Target(lambda x: -0.5 * state["s"] * anp.sum(x**2), 2)
    run1, x = t.taped(), np.array([1.0, 2.0])
    for _ in range(100):
        run1.value_and_grad(x)                      # recorded at call 3, replayed since
    state["s"] = 4.0                                # the model changes between runs
    replay1 = run1._replay
    run2 = run1.taped()
    assert run2 is run1 and run2._replay is not replay1 and not run2._replay.tapes
    for _ in range(40):
        v, g = run2.value_and_grad(x)
        assert v == -0.5 * 4.0 * 5.0 and np.allclose(g, -4.0 * x)


def test_replayed_gradients_are_writable_arrays():
    "Old code: from the third call of a dynamic tape on, the gradient was a read-only broadcast view (`g *= 2` raised)."
    f = lambda x: anp.sum(x) + anp.sum((x > 0).astype(float))
    x = np.array([0.5, -1.0, 2.0])
    assert not Tape(f, x).static
    t = Target(f, 3).taped()
    for _ in range(6):                              # plain, plain, recorded, replays 1-3
        _, g = t.value_and_grad(x)
        g *= 2.0
        assert np.array_equal(g, [2.0, 2.0, 2.0])


def test_recordings_in_two_threads_do_not_mix():
    """Old code shared one ledger stack and one patched truth value between threads: with two threads recording at once,
    a try/except density was recorded on its except branch and a clean one refused, most of the time (205 and 206 of 300).
    The recorder now takes a lock; here each thread records 40 times, the sleeps making the recordings overlap."""
    import threading, time
    def clean(x):
        time.sleep(0.001)
        return anp.sum(anp.exp(x) * x)
    def caught(x):                                  # try/except as control flow: must always be refused
        try:
            time.sleep(0.001)
            return anp.sum(anp.log(anp.diag(anp.linalg.cholesky(anp.array([[1.0, x[0]], [x[0], 1.0]])))))
        except np.linalg.LinAlgError:
            return -1e3 - x[0]**2
    wrong = []
    def record(f, x, refused):
        for _ in range(40):
            try:
                Tape(f, x)
                if refused: wrong.append("recorded the except branch")
            except Untraceable:
                if not refused: wrong.append("refused a clean density")
    threads = [threading.Thread(target=record, args=(clean, np.ones(3), False)),
               threading.Thread(target=record, args=(caught, np.array([1.5]), True))]
    for th in threads: th.start()
    for th in threads: th.join()
    assert wrong == [] and targets.ArrayBox.__bool__ is targets._BOX_BOOL
