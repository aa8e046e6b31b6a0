"""Bulk effective sample size and rank-normalized split R-hat of MCMC draws (Vehtari, Gelman,
Simpson, Carpenter and Buerkner 2021, "Rank-normalization, folding, and localization: an
improved R-hat for assessing convergence of MCMC"), as Stan and ArviZ compute them.

Every function takes `draws` of shape [chains, draws, dim] and returns one value per parameter
([dim]). ArviZ is not used because its 1.x releases need Python 3.12; the estimator below is
ArviZ's `_ess` (Geyer's initial positive then monotone sequence over the autocorrelations of
all chains, with the improved truncation) applied to split, rank-normalized chains.
"""

from __future__ import annotations

import numpy as np
from scipy import special, stats


def split_chains(draws: np.ndarray) -> np.ndarray:
    """[chains, n, dim] -> [2 * chains, n // 2, dim]: each chain's first and second half (the
    middle draw dropped when n is odd), so that a trend within a chain shows as disagreement."""
    half = draws.shape[1] // 2
    return np.concatenate([draws[:, :half], draws[:, draws.shape[1] - half :]], axis=0)


def rank_normalize(draws: np.ndarray) -> np.ndarray:
    """Normal scores of the pooled ranks per parameter (average ranks for ties, Blom's offsets
    3/8 and 1/4), keeping the [chains, n, dim] shape."""
    chains, n, dim = draws.shape
    pooled = draws.reshape(chains * n, dim)
    ranks = stats.rankdata(pooled, axis=0, method="average")
    scores = special.ndtri((ranks - 0.375) / (chains * n + 0.25))
    return scores.reshape(chains, n, dim)


def autocovariance(draws: np.ndarray) -> np.ndarray:
    """Biased autocovariance per chain and parameter over lags 0..n-1, by FFT: [chains, n, dim]."""
    n = draws.shape[1]
    centred = draws - draws.mean(axis=1, keepdims=True)
    size = 2 ** int(np.ceil(np.log2(2 * n)))
    spectrum = np.fft.rfft(centred, n=size, axis=1)
    return np.fft.irfft(spectrum * np.conjugate(spectrum), n=size, axis=1)[:, :n] / n


def ess_of_parameter(acov: np.ndarray, chain_means: np.ndarray) -> float:
    """ESS of one parameter from its autocovariances [chains, n] and chain means [chains]."""
    chains, n = acov.shape
    mean_var = np.mean(acov[:, 0]) * n / (n - 1.0)
    var_plus = mean_var * (n - 1.0) / n
    if chains > 1:
        var_plus += np.var(chain_means, ddof=1)
    if not var_plus > 0:
        return float("nan")
    rho = np.zeros(n)
    rho_even, rho_odd = 1.0, 1.0 - (mean_var - np.mean(acov[:, 1])) / var_plus
    rho[0], rho[1] = rho_even, rho_odd
    t = 1
    while t < n - 3 and rho_even + rho_odd > 0.0:  # Geyer's initial positive sequence
        rho_even = 1.0 - (mean_var - np.mean(acov[:, t + 1])) / var_plus
        rho_odd = 1.0 - (mean_var - np.mean(acov[:, t + 2])) / var_plus
        if rho_even + rho_odd >= 0:
            rho[t + 1], rho[t + 2] = rho_even, rho_odd
        t += 2
    max_t = t - 2
    if rho_even > 0:
        rho[max_t + 1] = rho_even
    t = 1
    while t <= max_t - 2:  # ... made monotone
        if rho[t + 1] + rho[t + 2] > rho[t - 1] + rho[t]:
            rho[t + 1] = rho[t + 2] = (rho[t - 1] + rho[t]) / 2.0
        t += 2
    total = chains * n
    tau = -1.0 + 2.0 * np.sum(rho[: max_t + 1]) + np.sum(rho[max_t + 1 : max_t + 2])
    return total / max(tau, 1.0 / np.log10(total))


def effective_sample_size(draws: np.ndarray) -> np.ndarray:
    """ESS per parameter of chains taken as they are (no splitting, no rank normalization)."""
    acov = autocovariance(draws)
    means = draws.mean(axis=1)
    return np.array([ess_of_parameter(acov[:, :, i], means[:, i]) for i in range(draws.shape[2])])


def bulk_ess(draws: np.ndarray) -> np.ndarray:
    """Bulk ESS per parameter: the ESS of the split, rank-normalized chains."""
    return effective_sample_size(rank_normalize(split_chains(np.asarray(draws, dtype=np.float64))))


def split_rhat(draws: np.ndarray) -> np.ndarray:
    """Split R-hat per parameter of [chains, n, dim] chains (already split and transformed)."""
    n = draws.shape[1]
    within = np.mean(np.var(draws, axis=1, ddof=1), axis=0)
    between = n * np.var(np.mean(draws, axis=1), axis=0, ddof=1)
    return np.sqrt(((n - 1) / n * within + between / n) / within)


def rank_rhat(draws: np.ndarray) -> np.ndarray:
    """Rank-normalized split R-hat per parameter: the larger of the bulk R-hat (of the normal
    scores) and the tail R-hat (of the folded draws' normal scores)."""
    split = split_chains(np.asarray(draws, dtype=np.float64))
    folded = np.abs(split - np.median(split.reshape(-1, split.shape[2]), axis=0))
    return np.maximum(split_rhat(rank_normalize(split)), split_rhat(rank_normalize(folded)))
