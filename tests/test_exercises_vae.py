"""The problem set of the VAE chapter (nbs/exercises/08_vae.ipynb): the solutions pass their checkers and typical wrong
answers fail, at every seed offset (exercise_harness). Each wrong answer is a mistake a student makes, named in its comment."""
import numpy as np
import pytest
from scipy import special, stats

from exercise_harness import chapter_tests, solutions


def _quietly(f):
    "The wrong answer f with numpy's overflow and log(0) warnings silenced (the checker reports the inf or NaN)."
    def g(*args):
        with np.errstate(all="ignore"):
            return f(*args)
    return g


# ---- vae.1: KL(N(mu_q, diag sigma_q^2) || N(mu_p, diag sigma_p^2)) summed over the last axis
def _kl(mq, lsq, mp, lsp, sq=2):
    return np.sum(lsp - lsq + (np.exp(sq * lsq) + (mq - mp) ** 2) / (2 * np.exp(sq * lsp)) - 0.5, axis=-1)


# ---- vae.3: the linear-Gaussian VAE's ELBO and its pieces
def _elbo_parts(x, W, b, s, mu, sigma):
    D = x.shape[-1]
    sq = np.sum((x - mu @ W.T - b) ** 2, axis=-1)
    spread = sigma ** 2 @ np.sum(W ** 2, axis=0)
    kl = np.sum(0.5 * (mu ** 2 + sigma ** 2 - 1) - np.log(sigma), axis=-1)
    return D, sq, spread, kl


# ---- vae.4
def _lam(W, s, scale=True):
    return np.eye(W.shape[1]) + W.T @ W / (s ** 2 if scale else 1.)


def _gap(Lam):
    return 0.5 * (np.sum(np.log(np.diag(Lam))) - np.linalg.slogdet(Lam)[1])


def _marginal_sds(W, s):
    Lam = _lam(W, s)
    Sigma = np.linalg.inv(Lam)
    sig2 = np.diag(Sigma)   # KL(N(m, diag sig2) || N(m, Sigma)) for the marginal variances
    gap = 0.5 * (np.sum(np.diag(Lam) * sig2) - len(sig2) - np.linalg.slogdet(Lam)[1] - np.sum(np.log(sig2)))
    return np.sqrt(sig2), gap


# ---- vae.6: the AR(1) prior of d = 16 values with alpha = 0.9
_AR_LAM = np.linalg.inv(0.9 ** np.abs(np.subtract.outer(np.arange(16), np.arange(16))))
_AR_MIN = 0.5 * (14 * np.log1p(0.81) - np.log1p(-0.81))


# ---- vae.8
def _top2_from_noise(noise, smallest=False, reverse=False):
    def sampler(logits, n_draws, rng):
        g = logits + noise(rng, (n_draws, len(logits)))
        order = np.argsort(g if smallest else -g, axis=1)[:, :2]
        return order[:, ::-1] if reverse else order
    return sampler


def _two_gumbel_max(logits, n_draws, rng):        # two independent draws: with replacement
    return np.stack([np.argmax(logits + rng.gumbel(size=(n_draws, len(logits))), axis=1) for _ in range(2)], axis=1)


# ---- vae.11
def _radial_parts(z, z0, alpha, beta):
    r = np.linalg.norm(z - z0, axis=-1)
    a = 1 + beta / (alpha + r)
    return z.shape[-1], r, a, beta * r / (alpha + r) ** 2


# ---- vae.12
def _vq_parts(z_e, E, g, beta):
    k = np.argmin(np.sum((z_e[:, None] - E) ** 2, -1), 1)
    diff = z_e - E[k]
    G = np.zeros_like(E)
    np.add.at(G, k, 2 * diff)
    return k, diff, G


def _fancy_index_bug(z_e, E, g, beta):            # G[k] += ... keeps only one of the vectors that share a code
    k, diff, _ = _vq_parts(z_e, E, g, beta)
    G = np.zeros_like(E)
    G[k] += 2 * diff
    return k, g - 2 * beta * diff, G


def _codebook_gets_g(z_e, E, g, beta):            # the reconstruction gradient sent on to the codebook as well
    k, diff, G = _vq_parts(z_e, E, g, beta)
    np.add.at(G, k, g)
    return k, g - 2 * beta * diff, G


WRONG = {
    "vae.1": [
        lambda mq, lsq, mp, lsp: _kl(mp, lsp, mq, lsq),                               # KL(p || q): arguments swapped
        lambda mq, lsq, mp, lsp: _kl(mq, lsq, mp, lsp, sq=1),                         # sigma where sigma^2 belongs
        lambda mq, lsq, mp, lsp: _kl(mq, lsq, mp, lsp) + 0.5 * mq.shape[-1],          # the -1/2 per coordinate forgotten
        lambda mq, lsq, mp, lsp: lsp - lsq + (np.exp(2 * lsq) + (mq - mp) ** 2) / (2 * np.exp(2 * lsp)) - 0.5,  # not summed
    ],
    "vae.2": [
        _quietly(lambda x, lg: np.sum(np.log(np.take_along_axis(np.exp(lg) / np.exp(lg).sum(-1, keepdims=True),
                                                                x[..., None], -1)[..., 0]), -1)),   # naive softmax: overflows
        lambda x, lg: np.sum(np.take_along_axis(lg, x[..., None], -1)[..., 0], -1),       # logits used as log probabilities
        lambda x, lg: np.sum(np.take_along_axis(lg - special.logsumexp(lg, axis=-2, keepdims=True),
                                                x[..., None], -1)[..., 0], -1),          # normalised over the pixels
    ],
    "vae.3": [
        # plug-in: log p(x | z = mu) - KL, the spread term of E_q ||x - W z - b||^2 forgotten
        lambda x, W, b, s, mu, sig: (lambda D, sq, sp, kl: -0.5 * D * np.log(2 * np.pi * s ** 2) - sq / (2 * s ** 2) - kl)(
            *_elbo_parts(x, W, b, s, mu, sig)),
        # normalising term with log s instead of log s^2
        lambda x, W, b, s, mu, sig: (lambda D, sq, sp, kl: -0.5 * D * np.log(2 * np.pi * s) - (sq + sp) / (2 * s ** 2) - kl)(
            *_elbo_parts(x, W, b, s, mu, sig)),
        # KL added instead of subtracted
        lambda x, W, b, s, mu, sig: (lambda D, sq, sp, kl: -0.5 * D * np.log(2 * np.pi * s ** 2) - (sq + sp) / (2 * s ** 2) + kl)(
            *_elbo_parts(x, W, b, s, mu, sig)),
        # spread term with sigma instead of sigma^2
        lambda x, W, b, s, mu, sig: (lambda D, sq, sp, kl: -0.5 * D * np.log(2 * np.pi * s ** 2)
                                     - (sq + sig @ np.sum(W ** 2, 0)) / (2 * s ** 2) - kl)(*_elbo_parts(x, W, b, s, mu, sig)),
    ],
    "vae.4": [
        _marginal_sds,                                                                   # sds of the posterior's marginals
        lambda W, s: (1 / np.sqrt(np.diag(_lam(W, s))), 0.0),                            # right sds, "Gaussian: no gap"
        lambda W, s: (1 / np.sqrt(np.diag(_lam(W, s, False))), _gap(_lam(W, s, False))),  # W^T W without 1/s^2
        lambda W, s: (1 / np.sqrt(np.diag(_lam(W, s))), -_gap(_lam(W, s))),              # sign of the gap flipped
    ],
    "vae.5": [
        lambda lw: (lw.mean(0), np.exp(2 * special.logsumexp(lw, 0) - special.logsumexp(2 * lw, 0))),  # the ELBO estimate
        _quietly(lambda lw: (np.log(np.mean(np.exp(lw), 0)),
                             np.sum(np.exp(lw), 0) ** 2 / np.sum(np.exp(2 * lw), 0))),                  # no log-sum-exp
        lambda lw: (special.logsumexp(lw, 0), np.exp(2 * special.logsumexp(lw, 0) - special.logsumexp(2 * lw, 0))),  # no -log K
        lambda lw: (special.logsumexp(lw, 0) - np.log(len(lw)), np.sum(special.softmax(lw, 0), 0)),  # ESS from sum, not squares
    ],
    "vae.6": [
        0.5 * (np.trace(_AR_LAM) - 16 - np.linalg.slogdet(_AR_LAM)[1]),   # q = N(0, I), the prior's marginals
        0.5 * (16 * np.log1p(0.81) - np.log1p(-0.81)),                   # interior precision also at the two ends
        2 * _AR_MIN,                                                      # factor 1/2 forgotten
        -0.5 * np.log1p(-0.81),                                           # two neighbours only
        0.0,                                                              # "the marginals are N(0, 1): no rate"
        0.5 * 15 * np.log1p(0.81),                                        # the prior with unit innovations instead
        4.984,                                                            # rounded to four digits
        np.array([_AR_MIN, _AR_MIN]),                                     # not one number
    ],
    "vae.7": [
        np.array([0.7012, 0.6366]),     # the two dimensions swapped
        np.array([0.2236, 0.7008]),     # ratio of the average norms, not the average ratio (d = 2 is dominated by Omega ~ pi)
        np.array([0.7143, 0.7863]),     # the point at t = 1/4 (n_steps=5, index 1), not the midpoint
        np.array([1.4153, 1.4141]),     # spherical over straight (a median, as the mean is infinite for d = 2)
    ],
    "vae.8": [
        _top2_from_noise(lambda rng, sh: -np.log(rng.random(sh))),                  # exponential noise, not Gumbel
        _top2_from_noise(lambda rng, sh: rng.normal(0, np.pi / np.sqrt(6), sh)),    # normal noise with the Gumbel's sd
        _top2_from_noise(lambda rng, sh: rng.gumbel(size=sh), smallest=True),       # the two smallest perturbed logits
        _top2_from_noise(lambda rng, sh: rng.gumbel(size=sh), reverse=True),        # the pair in the wrong order
        _two_gumbel_max,                                                            # with replacement
    ],
    "vae.9": [
        stats.logistic.sf(np.array([0.05, 0.2, 0.5, 1.0]) * np.log(99) - 1.0),      # y_1 > 0.99 only (one corner)
        (lambda t, gap: stats.logistic.cdf(-t * np.log(99) - gap) + stats.logistic.sf(t * np.log(99) - gap))(
            np.array([0.05, 0.2, 0.5, 1.0]), special.expit(1.) - special.expit(-1.)),  # probabilities passed as logits
        (lambda t: stats.logistic.cdf(-t * np.log(9) - 1) + stats.logistic.sf(t * np.log(9) - 1))(
            np.array([0.05, 0.2, 0.5, 1.0])),                                       # threshold 0.9 instead of 0.99
    ],
    "vae.10": [
        lambda L: L.max(-1),                                                         # q all on the best label
        lambda L: np.sum(special.softmax(L, -1) * L, -1),                            # the entropy forgotten
        lambda L: special.logsumexp(L, -1) - np.log(L.shape[-1]),                    # an extra -log C
        _quietly(lambda L: np.log(np.sum(np.exp(L), -1))),                           # no log-sum-exp: -inf near -1500
    ],
    "vae.11": [
        lambda z, z0, al, be: (lambda d, r, a, c: d * np.log(a))(*_radial_parts(z, z0, al, be)),                 # h' missing
        lambda z, z0, al, be: (lambda d, r, a, c: d * np.log(a) + np.log(a - c))(*_radial_parts(z, z0, al, be)),  # d, not d - 1
        lambda z, z0, al, be: (lambda d, r, a, c: (d - 1) * np.log(a) + np.log(a + c))(*_radial_parts(z, z0, al, be)),  # sign of h'
    ],
    "vae.12": [
        _fancy_index_bug,                                                             # G[k] += ... loses repeated codes
        lambda z_e, E, g, beta: (lambda k, diff, G: (k, -2 * beta * diff, G))(*_vq_parts(z_e, E, g, beta)),  # no straight-through
        _codebook_gets_g,                                                             # reconstruction gradient to the codebook
        lambda z_e, E, g, beta: (lambda k, diff, G: (k, g - 2 * diff, beta * G))(*_vq_parts(z_e, E, g, beta)),  # beta on the wrong term
    ],
}

test_solution_passes, test_wrong_answer_fails, test_every_checker_has_two_wrong_answers = chapter_tests("vae", WRONG)


def test_lists_and_size_one_arrays_pass(seed):
    "A pair or triple returned as a list, and the number of vae.6 in an array of size 1 or to 7 digits, are accepted."
    from bayesnotes.exercises import check
    ns = solutions("vae")
    for ex_id, name in (("vae.4", "best_diag_encoder"), ("vae.5", "iwae_ess"), ("vae.12", "vq_grads")):
        res = check(ex_id, lambda *args, f=ns[name]: list(f(*args)), rng=seed(17))
        assert res.passed, res.message
    for answer in (np.array([_AR_MIN]), [_AR_MIN], np.array([[_AR_MIN]]), float(f"{_AR_MIN:.7g}")):
        res = check("vae.6", answer, rng=seed(17))
        assert res.passed, res.message


@pytest.mark.parametrize("ex_id,j", [("vae.3", 0), ("vae.4", 0), ("vae.4", 2), ("vae.6", 2), ("vae.10", 0), ("vae.11", 0)])
def test_derive_answers_are_not_revealed(ex_id, j, seed):
    "In the derive exercises a wrong answer is told what is wrong, never the expected value."
    from bayesnotes.exercises import check
    res = check(ex_id, WRONG[ex_id][j], rng=seed(17))
    assert res.status == "failed" and "expected:" not in res.message, res.message


def test_vae8_hints(seed):
    "A reversed pair is named; noise of the wrong law is pointed at, even when its first class is nearly right."
    from bayesnotes.exercises import check
    reversed_, normal = WRONG["vae.8"][3], WRONG["vae.8"][1]
    assert "reversed" in check("vae.8", reversed_, rng=seed(17)).message
    res = check("vae.8", normal, rng=seed(17))
    assert res.status == "failed" and "noise" in res.message and "first class is right" not in res.message, res.message
