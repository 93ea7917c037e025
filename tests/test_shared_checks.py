"""The messages the samplers give when a user's function or argument is wrong, through the shared checks of `utils`
(review 00a): each names the argument or the user's own function, and a checked value is the value the sampler uses.
The checks themselves are tested in the hidden cells of nbs/00a_utils.ipynb."""
import numpy as np
import pytest
from scipy import stats

from bayesnotes.ais import ais
from bayesnotes.bnn import mlp_init, sample_prior_functions
from bayesnotes.pbp import pbp, pbp_epochs
from bayesnotes.pmcmc import csmc
from bayesnotes.smc import (LinearGaussianSSM, StateSpaceModel, bootstrap_filter, bootstrap_model, guided_model, ibis,
                            smc, tempered_smc)
from bayesnotes.smcsamplers import ar1_smc2_example, gaussian_abc_example, smc2, smc_abc, waste_free_smc


def log_prior(th): return stats.norm.logpdf(th[:, 0])
def log_lik(th): return stats.norm.logpdf(0.5, th[:, 0], 1.0)
def prior_sample(rng, N): return rng.normal(size=(N, 1))
def log_lik_batch(th, yb): return np.sum(stats.norm.logpdf(np.asarray(yb).reshape(1, -1), th[:, :1], 1.0), axis=1)


class Walk(StateSpaceModel):
    "A 1-d random walk observed in noise; subclasses break one method."
    def sample_initial(self, rng, N): return rng.normal(size=(N, 1))
    def sample_transition(self, rng, t, xp): return xp + rng.normal(size=xp.shape)
    def log_obs(self, t, x, yt): return stats.norm.logpdf(yt[0], x[:, 0], 1.0)


class ShortTransition(Walk):
    def sample_transition(self, rng, t, xp): return rng.normal(size=(len(xp) - 1, 1))

class NaNTransition(Walk):
    def sample_transition(self, rng, t, xp): return np.sqrt(xp - 10) + rng.normal(size=xp.shape)

class NaNInitial(Walk):
    def sample_initial(self, rng, N): return np.full((N, 1), np.nan)

class BadOptimal(LinearGaussianSSM):
    def sample_optimal(self, rng, t, xp, yt, N): return np.full((N, 1), np.inf)


# ------------------------------------------------------------ particles: the user's state-space method is named
@pytest.mark.parametrize("ssm,said", [
    (ShortTransition(), r"^ShortTransition.sample_transition must return particles with first axis N=20 at step t=1, got shape \(19, 1\)"),
    (NaNTransition(), r"^NaNTransition.sample_transition returned NaN or inf particles at step t=1"),
    (NaNInitial(), r"^NaNInitial.sample_initial returned NaN or inf particles at step t=0"),
])
def test_bootstrap_filter_names_the_users_method(ssm, said, seed):
    with np.errstate(invalid="ignore"), pytest.raises(ValueError, match=said):
        bootstrap_filter(ssm, np.zeros(5), 20, rng=seed())
    with np.errstate(invalid="ignore"), pytest.raises(ValueError, match=said.replace("N=20", "N=5").replace(r"\(19, 1\)", r"\(4, 1\)")):
        csmc(bootstrap_model(ssm, np.zeros(5)), np.zeros((5, 1)), 5, rng=seed(), ancestor_sampling=False)


def test_guided_model_names_sample_optimal(seed):
    ssm = BadOptimal(A=0.9, C=1.0, Q=1.0, R=1.0)
    with pytest.raises(ValueError, match=r"^BadOptimal.sample_optimal returned NaN or inf particles at step t=0"):
        smc(guided_model(ssm, np.zeros(4)), 10, seed())


def test_a_good_state_space_model_still_runs(seed):
    "The checks in the bootstrap model change nothing for valid draws: the same seed gives the same filter."
    a = bootstrap_filter(Walk(), np.zeros(6), 50, rng=seed(1))
    b = smc(bootstrap_model(Walk(), np.zeros(6)), 50, seed(1))
    assert a.log_evidence == b.log_evidence and np.array_equal(a.particles, b.particles)


# ------------------------------------------------------------ n_mcmc and scale: checked, and the checked values used
def _runs(n_mcmc, scale, s):
    s_obs, simulate, lp_abc, ps_abc = gaussian_abc_example()
    y, ssm_of, lp_ar, ps_ar = ar1_smc2_example(T=5)
    return {
        "ais": lambda: ais(log_prior, log_lik, prior_sample, 50, n_temps=5, n_mcmc=n_mcmc, scale=scale, rng=s).log_evidence,
        "tempered_smc": lambda: tempered_smc(log_prior, log_lik, prior_sample, 50, s, n_mcmc=n_mcmc, scale=scale).log_evidence,
        "ibis": lambda: ibis(log_prior, log_lik_batch, prior_sample, np.array([0.3, -0.2, 0.5]), 50, s,
                             n_mcmc=n_mcmc, scale=scale).log_evidence,
        "waste_free_smc": lambda: waste_free_smc(log_prior, log_lik, prior_sample, 50, P=5, rng=s, scale=scale).log_evidence,
        "smc_abc": lambda: smc_abc(simulate, s_obs, lp_abc, ps_abc, 50, 0.5, s, max_steps=3, n_mcmc=n_mcmc,
                                   scale=scale).log_evidence,
        "smc2": lambda: smc2(ssm_of, lp_ar, ps_ar, y, 20, 10, s, n_mcmc=n_mcmc, scale=scale).log_evidence,
    }


@pytest.mark.parametrize("name", ["ais", "tempered_smc", "ibis", "waste_free_smc", "smc_abc", "smc2"])
def test_integral_float_n_mcmc_and_array_scale_run_as_their_int_and_float(name, seed):
    "n_mcmc=2.0 used to reach range() and fail with an unnamed TypeError; it now runs exactly as n_mcmc=2."
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                       # smc_abc may warn that eps_min is not reached
        got = _runs(2.0, np.array(0.8), seed(7))[name]()
        want = _runs(2, 0.8, seed(7))[name]()
    assert got == want


@pytest.mark.parametrize("name", ["ais", "tempered_smc", "ibis", "waste_free_smc", "smc_abc", "smc2"])
@pytest.mark.parametrize("n_mcmc,scale,said", [(2.5, None, "n_mcmc must be an integer >= 0"), (True, None, "n_mcmc"),
                                               (1, True, "scale must be None or a positive number"),
                                               (1, -1.0, "scale must be positive"), (1, [0.1, 0.2], r"scale must have shape \(\)")])
def test_bad_n_mcmc_or_scale_is_refused_by_name(name, n_mcmc, scale, said, seed):
    if name == "waste_free_smc" and scale is None:
        pytest.skip("waste-free SMC takes no n_mcmc (its chains have P - 1 moves)")
    with pytest.raises(ValueError, match=said):
        _runs(n_mcmc, scale, seed())[name]()


# ------------------------------------------------------------ the user's log densities and prior draws
@pytest.mark.parametrize("bad_lik,said", [
    (lambda th: log_lik(th) + 0j, r"^log_lik must return one value per particle as real numbers"),
    (lambda th: np.where(th[:, 0] > 0, np.inf, 0.0), r"^log_lik returned NaN or \+inf"),
    (lambda th: [str(v) + "x" for v in th[:, 0]], r"^log_lik must return one value per particle as real numbers"),
])
def test_log_lik_that_is_not_real_numbers_is_refused(bad_lik, said, seed):
    for run in (lambda: tempered_smc(log_prior, bad_lik, prior_sample, 50, seed()),
                lambda: ais(log_prior, bad_lik, prior_sample, 50, n_temps=3, rng=seed())):
        with pytest.raises(ValueError, match=said):
            run()


def test_an_error_inside_prior_sample_keeps_its_type_and_message(seed):
    def typo(rng, N): return rng.nrmal(size=(N, 1))
    def negative(rng, N): return rng.normal(scale=-1.0, size=(N, 1))
    for run, exc, said in ((lambda ps: ais(log_prior, log_lik, ps, 50, n_temps=3, rng=seed()), None, None),
                           (lambda ps: tempered_smc(log_prior, log_lik, ps, 50, seed()), None, None)):
        with pytest.raises(AttributeError, match="nrmal") as info:
            run(typo)
        assert "swap" not in str(info.value)
        with pytest.raises(ValueError, match="scale < 0") as info:
            run(negative)
        assert "swap" not in str(info.value) and type(info.value) is ValueError
    with pytest.raises(ValueError, match="prior_sample must return real numbers"):
        ais(log_prior, log_lik, lambda rng, N: rng.normal(size=(N, 1)) + 1j, 50, n_temps=3, rng=seed())


# ------------------------------------------------------------ networks: widths and inputs
@pytest.mark.parametrize("hidden,said", [(2.9, "hidden must be an integer >= 1, got 2.9"), (0.5, "hidden must be an integer"),
                                         (True, "hidden must be an integer"), ([50.5, 1.5], r"hidden\[0\] must be an integer"),
                                         (np.inf, "hidden must be an integer"), ("50", "hidden must be a sequence")])
def test_non_integer_hidden_widths_are_refused(hidden, said, seed):
    x = np.linspace(-1, 1, 5)
    with pytest.raises(ValueError, match=said):
        sample_prior_functions(x, 3, rng=seed(), hidden=hidden)
    with pytest.raises(ValueError, match=said):
        pbp(x[:, None], np.sin(x), hidden=hidden, n_epochs=1, rng=seed())


def test_layer_sizes_are_not_truncated_or_read_digit_by_digit(seed):
    for sizes, said in (("231", "got the string"), ([2, 3.7, 1], r"sizes\[1\] must be an integer >= 1, got 3.7"),
                        ([True, 3, 1], r"sizes\[0\]"), ([2, np.nan, 1], r"sizes\[1\]")):
        with pytest.raises(ValueError, match=said):
            mlp_init(sizes, seed())
    assert np.array_equal(mlp_init([2, 3.0, 1], seed()), mlp_init((2, 3, 1), seed()))


def test_inputs_without_columns_are_refused_under_the_arguments_name(seed):
    with pytest.raises(ValueError, match=r"^x must have at least one column, got shape \(5, 0\)"):
        sample_prior_functions(np.zeros((5, 0)), 3, rng=seed())
    with pytest.raises(ValueError, match="^x must be real numbers"):
        sample_prior_functions(np.array([1 + 2j, 3.0]), 3, rng=seed())


# ------------------------------------------------------------ PBP's test sets
def test_pbp_epochs_names_the_test_set_at_fault(seed):
    rng = np.random.default_rng(seed())
    X, y = rng.normal(size=(20, 1)), rng.normal(size=20)
    Xt = rng.normal(size=(10, 1))
    Xnan = Xt.copy(); Xnan[3, 0] = np.nan
    for sets, said in (([(Xt, y[:10]), (Xnan, y[:10])], r"^test_sets\[1\] X must be finite"),
                       ([(Xt, y[:9])], r"^test_sets\[0\] y must have shape \(10,\)"),
                       ([(Xt, y[:10, None])], r"^test_sets\[0\] y must have shape"),
                       ([(np.zeros((10, 2)), y[:10])], r"^test_sets\[0\] X must have 1 columns"),
                       ([(Xt, np.full(10, np.inf))], r"^test_sets\[0\] y must be finite"),
                       ([Xt], r"^test_sets\[0\] must be a pair"), ([], "test_sets must hold at least one")):
        with pytest.raises(ValueError, match=said):
            pbp_epochs(X, y, sets, n_epochs=1, rng=seed())
    run = pbp_epochs(X, y, [(Xt, y[:10])], n_epochs=2, keep=(), rng=seed())   # a good set still runs
    assert run.rmse.shape == (2, 1) and np.all(np.isfinite(run.rmse))
