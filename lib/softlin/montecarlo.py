"""Monte Carlo tools shared by every chapter: prompts drawn from a token law, means with standard errors,
paired differences and weighted power-law fits.

A prompt of length L drawn i.i.d. from a token law ``mu`` is the empirical measure ``mu_hat_L``; anything
computed from it (an attention output, an error, a risk) is a random variable, and the book reports its
mean over many independent prompts with the standard error ``sd / sqrt(n)``. Rates are read off a
log-log fit whose slope error is inflated when the points scatter more than their errors allow.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch

from ._checks import (
    as_real_array,
    as_tensor_arg,
    check_draws,
    check_generator,
    check_memory,
    check_positive_int,
    check_real,
    check_str,
)
from ._progress import progress
from .measures import check_measure

__all__ = [
    "LimitFit",
    "MonteCarloEstimate",
    "PowerLawFit",
    "StartTrend",
    "check_above",
    "check_below",
    "check_close",
    "check_true",
    "fit_limit",
    "fit_power_law",
    "mean_and_stderr",
    "paired_difference",
    "prompt_batches",
    "start_trend",
]


def prompt_batches(measure, L: int, n_prompts: int, *, generator, max_tokens: int = 2**20):
    """Draw ``n_prompts`` independent prompts of ``L`` i.i.d. tokens from ``measure``, in batches.

    Yields token tensors of shape (n, L, D), n <= max(1, max_tokens // L), whose sizes add up to
    ``n_prompts``: memory stays bounded for long prompts (L = 10^6) and the draws are those of
    ``measure.sample(n * L)`` batch after batch, from ``generator`` only.

    Raises
    ------
    TypeError, ValueError
        At the call (not at the first batch): not a softlin measure, a missing or wrong generator,
        non-positive sizes, a batch beyond the machine's memory, more than ``MAX_DRAWS`` tokens.
    """
    check_measure(measure)
    for name, value in (("L", L), ("n_prompts", n_prompts), ("max_tokens", max_tokens)):
        check_positive_int(name, value)
    check_generator(generator, required=True)
    per_batch = max(1, max_tokens // L)
    sizes = f"L = {L}, n_prompts = {n_prompts}, max_tokens = {max_tokens}"
    check_draws(sizes, L * n_prompts)
    n_bytes = 2 * min(per_batch, n_prompts) * L * measure.dim * measure_itemsize(measure)
    check_memory(sizes, n_bytes, device=measure.device, what="one batch of prompts")
    return _batches(measure, L, n_prompts, per_batch, generator)


def measure_itemsize(measure) -> int:
    """Bytes per coordinate of the tokens ``measure`` draws."""
    return torch.empty(0, dtype=measure.dtype).element_size()


def _batches(measure, L, n_prompts, per_batch, generator):
    for start in progress(range(0, n_prompts, per_batch), work=n_prompts * L * measure.dim):
        n = min(per_batch, n_prompts - start)
        yield measure.sample(n * L, generator=generator).reshape(n, L, measure.dim)


def check_axis(dim, ndim):
    """``dim`` indexes one of ``ndim`` dimensions (negative from the end)."""
    check_positive_int("dim", dim, minimum=-ndim)
    if dim >= ndim:
        raise ValueError(f"dim must index one of the {ndim} dimension(s) of the samples, got {dim}")


class MonteCarloEstimate(NamedTuple):
    """A Monte Carlo mean with its standard error ``sd / sqrt(n)`` over ``n`` i.i.d. samples."""

    mean: object
    stderr: object
    n: int

    def __str__(self):
        return f"{float(self.mean):.4g} ± {float(self.stderr):.2g}"


def _as_samples(name, x, dim):
    if isinstance(x, torch.Tensor):
        x = as_tensor_arg(name, x, min_dim=1).detach().double().cpu()
    else:
        x = torch.as_tensor(as_real_array(name, x, min_dim=1))
    check_axis(dim, x.dim())
    if x.shape[dim] < 2:
        raise ValueError(
            f"{name} must hold at least two samples along dim {dim} to estimate a standard "
            f"error, got shape {tuple(x.shape)}"
        )
    return x


def mean_and_stderr(samples, dim: int = 0) -> MonteCarloEstimate:
    """Mean of i.i.d. ``samples`` along ``dim`` and its standard error ``sd / sqrt(n)`` (float64).

    ``samples``: Tensor or array-like with at least two samples along ``dim``. Returns floats for 1-D input,
    float64 tensors of the remaining shape otherwise.
    """
    x = _as_samples("samples", samples, dim)
    n = x.shape[dim]
    mean, se = x.mean(dim), x.std(dim) / math.sqrt(n)
    if mean.dim() == 0:
        return MonteCarloEstimate(float(mean), float(se), n)
    return MonteCarloEstimate(mean, se, n)


def paired_difference(x, y, dim: int = 0) -> MonteCarloEstimate:
    """Mean and standard error of ``x - y`` for paired samples (the same prompt, seed or start for both).

    Pairing removes the variation the two share, so the error of the difference is usually far smaller than
    the two standard errors combined. ``x`` and ``y`` must have the same shape.
    """
    x, y = _as_samples("x", x, dim), _as_samples("y", y, dim)
    if x.shape != y.shape:
        raise ValueError(
            f"x and y must have the same shape (paired samples), got {tuple(x.shape)} and "
            f"{tuple(y.shape)}"
        )
    return mean_and_stderr(x - y, dim)


class PowerLawFit(NamedTuple):
    """Fit of ``log value = log prefactor + slope * log L`` (:func:`fit_power_law`)."""

    slope: float
    slope_stderr: float  #: includes the factor sqrt(max(1, chi2_dof)) when errors were given
    prefactor: float
    chi2_dof: float  #: reduced chi-square of the weighted fit (about 1 for a good fit; NaN without errors)

    def predict(self, L):
        """``prefactor * L ** slope`` (NumPy)."""
        return self.prefactor * as_real_array("L", L) ** self.slope


def fit_power_law(L_values, values, stderr=None) -> PowerLawFit:
    """Fit ``values ≈ prefactor * L ** slope`` by least squares in log-log coordinates.

    With ``stderr`` (standard errors of ``values``), points are weighted by ``(values / stderr)^2``, the
    inverse delta-method variances of ``log values``. The slope's error from those variances is multiplied
    by ``sqrt(chi2_dof)`` when the reduced chi-square exceeds 1 (the Birge ratio): a power law that does not
    fit within the errors widens the interval instead of hiding. Without ``stderr``: ordinary least squares
    and the residual-based error.

    Parameters
    ----------
    L_values, values : 1-D array-likes of equal length (at least 3); L_values and values positive.
    stderr : 1-D array-like of positive standard errors, optional.

    Returns
    -------
    PowerLawFit

    Raises
    ------
    ValueError
        Mismatched or too short inputs, non-positive or non-finite values or errors.
    """
    L, v = as_real_array("L_values", L_values), as_real_array("values", values)
    if L.ndim != 1 or v.shape != L.shape or L.size < 3:
        raise ValueError(
            f"L_values and values must be 1-D of equal length >= 3, got shapes {L.shape} "
            f"and {v.shape}"
        )
    if np.any(L <= 0) or not np.all(np.isfinite(L)):
        raise ValueError(f"L_values must be positive and finite, got {L.tolist()}")
    if not np.all(np.isfinite(v)) or np.any(v <= 0):
        raise ValueError(
            f"values must be finite and positive to be fitted in log-log coordinates, "
            f"got {v.tolist()}"
        )
    x, y = np.log(L), np.log(v)
    if stderr is None:
        w = np.ones_like(y)
    else:
        s = as_real_array("stderr", stderr, finite=False)
        if s.shape != v.shape or not np.all(np.isfinite(s)) or np.any(s <= 0):
            raise ValueError(
                f"stderr must be positive and finite with the shape of values {v.shape}, "
                f"got {s.tolist()}"
            )
        w = (v / s) ** 2
    X = np.stack([np.ones_like(x), x], axis=1)
    A = X.T @ (w[:, None] * X)
    coef = np.linalg.solve(A, X.T @ (w * y))
    chi2 = float(np.sum(w * (y - X @ coef) ** 2))
    dof = x.size - 2
    if stderr is None:
        var, chi2_dof = np.linalg.inv(A)[1, 1] * chi2 / dof, float("nan")
    else:
        chi2_dof = chi2 / dof
        var = np.linalg.inv(A)[1, 1] * max(1.0, chi2_dof)
    return PowerLawFit(float(coef[1]), float(math.sqrt(var)), float(math.exp(coef[0])), chi2_dof)


# --------------------------------------------------------------------------------------------------
# The book's one check vocabulary. Each check prints a one-line verdict and raises AssertionError with
# the numbers and the claim when it fails; all take the same keywords. ``value``, ``ref``, ``bound`` and
# ``se`` may be arrays (every entry must pass; the verdict quotes the worst one). ``n_se`` is how many
# standard errors ``se`` the claim allows (a page says why: the number of checks, the false-alarm rate
# it accepts); ``slack`` adds a known bias, correction term or rounding bound.


def _worst(margin, *arrays):
    """The entries of ``arrays`` at the smallest ``margin`` (all broadcast together), as floats."""
    margin = np.asarray(margin, dtype=np.float64)
    arrays = np.broadcast_arrays(margin, *(np.asarray(a, dtype=np.float64) for a in arrays))
    k = np.unravel_index(int(np.argmin(margin)) if margin.size else 0, arrays[0].shape)
    return [float(a[k]) for a in arrays], margin.size


def _verdict(passed, what, text, n):
    where = f" (worst of {n})" if n > 1 else ""
    line = f"{what} {text}{where}"
    if not passed:
        raise AssertionError(f"check failed: {line}")
    print(line)


def _distance(v, ref, s, below_word="below", above_word="above"):
    """Where ``v`` lies from ``ref`` in standard errors ``s``, e.g. "is 23 SE below 1"."""
    if s <= 0:
        return f"is {'below' if v < ref else 'above' if v > ref else 'at'} {ref:.4g}"
    m = (ref - v) / s
    return f"is {abs(m):.3g} SE {below_word if m >= 0 else above_word} {ref:.4g}"


def _claim(what, se, n_se, slack, **numbers):
    """The numbers of a claim, checked: float64 arrays that broadcast together, no NaN (inf is a value
    a claim can be about), ``se`` and ``slack`` finite and non-negative (``slack`` may be per entry),
    ``n_se`` a non-negative float."""
    check_str("what", what)
    arrays = [as_real_array(name, x, finite=False) for name, x in numbers.items()]
    for name, a in zip(numbers, arrays):
        if np.isnan(a).any():
            raise ValueError(f"{name} must be a number, got {int(np.isnan(a).sum())} NaN entries")
    se, slack = as_real_array("se", se), as_real_array("slack", slack)
    for name, a in (("se", se), ("slack", slack)):
        if (a < 0).any():
            raise ValueError(f"{name} must be non-negative, got minimum {float(a.min()):.3g}")
    try:
        np.broadcast_shapes(se.shape, slack.shape, *(a.shape for a in arrays))
    except ValueError as exc:
        names, values = [*numbers, "se", "slack"], [*arrays, se, slack]
        shapes = ", ".join(f"{k} {a.shape}" for k, a in zip(names, values))
        raise ValueError(f"the numbers of a claim must broadcast together, got {shapes}") from exc
    n_se = check_real("n_se", n_se, nonneg=True)
    return (*arrays, se, n_se, float(slack) if slack.ndim == 0 else slack)


def _allowance(n_se, s, slack):
    """ "4 SE + 0.001", "4 SE" or "0.001" for the verdict line."""
    slack = float(np.max(slack))  # the largest, where it is given per entry
    parts = ([f"{n_se:.3g} SE"] if n_se else []) + ([f"{slack:.2g}"] if slack else [])
    return " + ".join(parts)


def check_close(value, ref, *, se=0.0, n_se=0.0, slack=0.0, what="value"):
    """Claim ``|value - ref| <= n_se * se + slack``.

    Prints e.g. ``slope -0.498 ± 0.006 is 0.333 SE from -0.5: within the 4 SE allowed``.
    """
    value, ref, se, n_se, slack = _claim(what, se, n_se, slack, value=value, ref=ref)
    allowed = n_se * se + slack
    (_, v, r, s, a), n = _worst(allowed - np.abs(value - ref), value, ref, se, allowed)
    passed = bool(np.all(np.abs(value - ref) <= allowed))
    word = "within" if passed else "NOT within"
    if n_se and s > 0:
        text = (
            f"{v:.4g} ± {s:.3g} is {abs(v - r) / s:.3g} SE from {r:.4g}: {word} the "
            f"{_allowance(n_se, s, slack)} allowed"
        )
    else:
        text = f"{v:.6g} {word} {a:.2g} of {r:.6g}"
    _verdict(passed, what, text, n)


def _one_sided(passed, v, b, s, n_se, slack, side):
    """The verdict text of check_below (``side`` "below") and check_above ("above")."""
    tail = f" (slack {float(np.max(slack)):.2g})" if np.any(slack) else ""
    if not n_se:
        shifted = b + float(np.max(slack)) * (1 if side == "below" else -1)
        return f"{v:.4g}, {side if passed else 'NOT ' + side} {shifted:.4g}"
    where = f"{v:.4g} ± {s:.3g} {_distance(v, b, s)}"
    if passed:
        return f"{where}; the check needs {n_se:.3g} SE{tail}: holds"
    return f"{where}: NOT {side} it by the required {n_se:.3g} SE{tail}"


def check_below(value, bound, *, se=0.0, n_se=0.0, slack=0.0, what="value"):
    """Claim ``value + n_se * se < bound + slack``: below ``bound`` by at least ``n_se`` standard
    errors (up to ``slack``). Prints e.g. ``ratio 0.9 ± 0.02 is 5 SE below 1; the check needs 4 SE:
    holds``."""
    value, bound, se, n_se, slack = _claim(what, se, n_se, slack, value=value, bound=bound)
    (_, v, b, s), n = _worst(bound + slack - (value + n_se * se), value, bound, se)
    passed = bool(np.all(value + n_se * se < bound + slack))
    _verdict(passed, what, _one_sided(passed, v, b, s, n_se, slack, "below"), n)


def check_above(value, bound, *, se=0.0, n_se=0.0, slack=0.0, what="value"):
    """Claim ``value - n_se * se > bound - slack``: above ``bound`` by at least ``n_se`` standard
    errors (up to ``slack``)."""
    value, bound, se, n_se, slack = _claim(what, se, n_se, slack, value=value, bound=bound)
    (_, v, b, s), n = _worst((value - n_se * se) - (bound - slack), value, bound, se)
    passed = bool(np.all(value - n_se * se > bound - slack))
    _verdict(passed, what, _one_sided(passed, v, b, s, n_se, slack, "above"), n)


def check_true(condition, *, what, detail=""):
    """Claim that ``condition`` holds (a statement that is not a comparison of numbers: a set of
    starts, an exact structure). ``what`` states the claim; ``detail`` is printed with it."""
    check_str("what", what)
    check_str("detail", detail)
    if isinstance(condition, torch.Tensor):
        condition = condition.detach().cpu().numpy()
    if condition is None or np.asarray(condition).dtype != np.bool_:
        raise TypeError(
            f"condition must be True or False (or an array of them), got {type(condition).__name__}"
        )
    passed = bool(np.all(condition))
    text = ("holds" if passed else "does NOT hold") + (f": {detail}" if detail else "")
    _verdict(passed, what, text, 1)


# --------------------------------------------------------------------------------------------------
# trends over random starts


class StartTrend(NamedTuple):
    """The trend of a statistic measured on S random starts at n values of ``x`` (:func:`start_trend`)."""

    slope: float  #: the mean over the starts of each start's least-squares slope
    slope_stderr: float  #: the starts' spread and the measurement errors, carried through the fit
    chi2_dof: (
        float  #: the misfit of the start-averaged values about a straight line (about 1: fits)
    )


def start_trend(x, values, stderr=None) -> StartTrend:
    """The slope of a per-start statistic against ``x``, with its error and the straight line's misfit.

    Each start ``s`` (the same weights at every ``x``) gets its own least-squares slope of
    ``values[:, s]`` on ``x``; the trend is their mean, and its standard error combines the starts'
    spread with the measurement error ``stderr`` of the start-averaged value at each ``x`` (shared by
    the starts, independent across ``x``), carried through the least-squares weights. Fitting within
    each start removes the level differences between starts, which may be far larger than the trend.
    ``chi2_dof`` is the reduced chi-square of the start-averaged values about the mean line, each
    residual divided by its standard error (the starts' scatter about their own lines, pooled over
    ``x``, and ``stderr``): near 1 when a straight line describes the data; much larger means the
    trend is an average over a curved range, to be reported on windows, not as one slope.

    Parameters
    ----------
    x : 1-D array-like (n,), n >= 3 (e.g. log10 L); values : array-like (n, S), S >= 2 starts;
    stderr : array-like (n,) >= 0, optional (0 when the values carry no measurement error).

    Returns
    -------
    StartTrend
    """
    x, y = as_real_array("x", x), as_real_array("values", values)
    if x.ndim != 1 or x.size < 3 or y.ndim != 2 or y.shape[0] != x.size or y.shape[1] < 2:
        raise ValueError(
            f"x must be 1-D with n >= 3 values and values (n, S) with S >= 2, got shapes "
            f"{x.shape} and {y.shape}"
        )
    s = np.zeros(x.size) if stderr is None else as_real_array("stderr", stderr)
    if s.shape != x.shape or not np.all(np.isfinite(s)) or np.any(s < 0):
        raise ValueError(f"stderr must be finite and >= 0 with the shape of x {x.shape}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("x and values must be finite")
    xc = x - x.mean()
    weights = xc / (xc**2).sum()  # slope = weights @ values
    slopes = weights @ y  # (S,)
    S = y.shape[1]
    se = math.sqrt(slopes.var(ddof=1) / S + float(weights**2 @ s**2))
    residuals = y - (y.mean(0) + np.outer(xc, slopes))  # each start about its own line (n, S)
    mean_res = residuals.mean(1)  # the start-averaged values about the mean line
    # the starts' scatter about their lines, pooled over x: (n - 2)(S - 1) degrees of freedom
    spread = ((residuals - mean_res[:, None]) ** 2).sum() / ((x.size - 2) * (S - 1))
    res_var = np.maximum(spread / S + s**2, np.finfo(float).tiny)
    chi2 = float((mean_res**2 / res_var).sum())
    return StartTrend(float(slopes.mean()), se, chi2 / (x.size - 2))


class LimitFit(NamedTuple):
    """Fit of ``values ≈ limit + slope / L`` (:func:`fit_limit`)."""

    limit: float
    limit_stderr: float  #: includes the factor sqrt(max(1, chi2_dof))
    slope: float
    chi2_dof: float


def fit_limit(L_values, values, stderr) -> LimitFit:
    """The large-L limit of ``values``, by a weighted least-squares fit of ``limit + slope / L``.

    For a quantity with an expansion ``C + D/L + O(L^-2)`` (``L x`` an error that falls like ``C/L``, a
    ratio of two such errors): the intercept estimates ``C``. Points are weighted by ``1 / stderr^2``;
    the intercept's standard error is multiplied by ``sqrt(chi2_dof)`` when the reduced chi-square
    exceeds 1, so that a range where the ``O(L^-2)`` terms still matter widens the interval instead of
    hiding.

    Parameters: L_values, values, stderr : 1-D array-likes of equal length >= 3; L_values and stderr
    positive. Returns a :class:`LimitFit`.
    """
    L, y = as_real_array("L_values", L_values), as_real_array("values", values)
    s = as_real_array("stderr", stderr)
    if L.ndim != 1 or L.size < 3 or y.shape != L.shape or s.shape != L.shape:
        raise ValueError(
            f"L_values, values and stderr must be 1-D of equal length >= 3, got shapes {L.shape}, "
            f"{y.shape} and {s.shape}"
        )
    if not (np.all(np.isfinite(L)) and np.all(L > 0) and np.all(np.isfinite(y))):
        raise ValueError("L_values must be positive and finite, values finite")
    if not (np.all(np.isfinite(s)) and np.all(s > 0)):
        raise ValueError(f"stderr must be positive and finite, got {s.tolist()}")
    X = np.stack([np.ones_like(L), 1 / L], 1) / s[:, None]
    coef, *_ = np.linalg.lstsq(X, y / s, rcond=None)
    chi2_dof = float(((X @ coef - y / s) ** 2).sum()) / (L.size - 2)
    var = np.linalg.inv(X.T @ X)[0, 0] * max(1.0, chi2_dof)
    return LimitFit(float(coef[0]), float(math.sqrt(var)), float(coef[1]), chi2_dof)
