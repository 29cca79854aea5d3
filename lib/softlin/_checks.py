"""The one place where softlin validates its inputs.

Every public function checks its arguments once, at the boundary, with these helpers; inner code and the
chapters' own code trust their inputs. Each error names the argument, what was received and what was
expected. Nothing is broadcast, truncated or clipped silently.

A public function whose formula other softlin code also needs is written as its formula under
:func:`validated_by`: the decorator runs the checks, the body trusts its arguments, and library code
that has already checked them calls ``fn.kernel``, the body alone. The page then shows the formula, with
the checks marked by the decorator line, and no argument is checked twice.
"""

from __future__ import annotations

import functools
import math

import torch


def validated_by(check):
    """Decorator: ``check(*args, **kwargs)`` validates the arguments, then the decorated body runs.

    The undecorated body stays available as ``fn.kernel`` for callers whose arguments are checked.
    """

    def decorate(kernel):
        @functools.wraps(kernel)
        def public(*args, **kwargs):
            check(*args, **kwargs)
            return kernel(*args, **kwargs)

        public.kernel = kernel
        return public

    return decorate


def as_tensor_arg(name: str, x, *, min_dim: int = 0, finite: bool = True) -> torch.Tensor:
    """``x`` if it is a floating-point tensor with at least ``min_dim`` dimensions and (when ``finite``)
    no NaN/inf. A caller that passes ``finite=False`` for a large input checks its result instead
    (:func:`check_result_finite`)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not torch.is_floating_point(x):
        raise TypeError(
            f"{name} must be a floating-point tensor (float32 or float64), got dtype {x.dtype}"
        )
    if x.dim() < min_dim:
        raise ValueError(
            f"{name} must have at least {min_dim} dimension(s), got shape {tuple(x.shape)}"
        )
    if finite:
        check_finite(name, x)
    return x


def check_finite(name: str, x: torch.Tensor) -> None:
    if x.numel() and not bool(torch.isfinite(x).all()):
        n_nan, n_inf = int(torch.isnan(x).sum()), int(torch.isinf(x).sum())
        raise ValueError(f"{name} must be finite, got {n_nan} NaN and {n_inf} inf entries")


def check_result_finite(result: torch.Tensor, name: str, x: torch.Tensor) -> torch.Tensor:
    """Deferred finiteness check of a large input ``x``: NaN or inf anywhere in ``x`` makes the small
    ``result`` non-finite (0 * inf and inf - inf are NaN), so scanning the result replaces a full pass over
    ``x``. Only then is ``x`` scanned, to say exactly what was wrong."""
    if bool(torch.isfinite(result).all()):
        return result
    check_finite(name, x)
    raise ValueError(
        f"the result is not finite although {name} is: the scores overflowed the dtype "
        f"{x.dtype}; rescale {name} or U"
    )


def check_matrix(name: str, x: torch.Tensor, rows: int | None, cols: int | None) -> None:
    """``x`` is 2-D of shape (rows, cols); ``None`` leaves a side free."""
    if (
        x.dim() != 2
        or (rows is not None and x.shape[0] != rows)
        or (cols is not None and x.shape[1] != cols)
    ):
        want = f"({'any' if rows is None else rows}, {'any' if cols is None else cols})"
        raise ValueError(f"{name} must have shape {want}, got {tuple(x.shape)}")


def check_same_leading(name: str, x: torch.Tensor, lead: tuple, ref_name: str) -> None:
    if tuple(x.shape[: len(lead)]) != tuple(lead) or x.dim() < len(lead):
        raise ValueError(
            f"the leading (batch) dimensions of {name} must equal those of {ref_name}, "
            f"{tuple(lead)}; got {name} of shape {tuple(x.shape)} (no implicit broadcasting)"
        )


def check_same_dtype_device(named: dict) -> None:
    items = [(k, v) for k, v in named.items() if v is not None]
    k0, v0 = items[0]
    for k, v in items[1:]:
        if v.dtype != v0.dtype:
            raise ValueError(
                f"{k} has dtype {v.dtype} but {k0} has dtype {v0.dtype}; use one dtype"
            )
        if v.device != v0.device:
            raise ValueError(f"{k} is on {v.device} but {k0} is on {v0.device}; use one device")


def check_weights(
    weights: torch.Tensor, expected_shape: tuple, *, allow_zero_mass: bool = False
) -> None:
    """Token weights of a weighted empirical measure: shape ``expected_shape``, non-negative, not all zero
    (unless ``allow_zero_mass``: a chunk of a longer prompt may carry no weight)."""
    if tuple(weights.shape) != tuple(expected_shape):
        raise ValueError(
            f"weights must have shape {tuple(expected_shape)} (one per token), "
            f"got {tuple(weights.shape)}"
        )
    if weights.numel() and bool((weights < 0).any()):
        raise ValueError(f"weights must be non-negative, got minimum {float(weights.min()):.3g}")
    if not allow_zero_mass and weights.numel() and bool((weights.sum(-1) <= 0).any()):
        raise ValueError(
            "weights must not be all zero for any prompt (the measure would have zero mass)"
        )


def check_positive_int(name: str, value, *, allow_none: bool = False, minimum: int = 1) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        want = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ValueError(f"{name} must be {want}, got {value!r}")


def check_real(name: str, value, *, positive: bool = False, nonneg: bool = False) -> float:
    """A finite real number (not a bool), optionally positive or non-negative; returned as a float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TypeError(f"{name} must be a finite real number, got {value!r}")
    if positive and value <= 0:
        raise ValueError(f"{name} must be positive, got {value!r}")
    if nonneg and value < 0:
        raise ValueError(f"{name} must be non-negative, got {value!r}")
    return float(value)


def check_choice(name: str, value, choices: tuple) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")


def check_generator(generator, *, required: bool = False) -> None:
    if generator is None and required:
        raise TypeError(
            "generator must be a torch.Generator (all randomness is explicit), got None"
        )
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(
            f"generator must be a torch.Generator or None, got {type(generator).__name__}"
        )


def psd_tolerance(cov: torch.Tensor) -> float:
    """Rounding tolerance of the PSD checks: ``1e3 * eps * max(max|cov|, 1)``."""
    scale = float(cov.abs().amax()) if cov.numel() else 0.0
    return 1e3 * torch.finfo(cov.dtype).eps * max(scale, 1.0)


def check_psd(name: str, cov: torch.Tensor) -> float:
    """Symmetric positive semi-definite (..., D, D), up to :func:`psd_tolerance`; returns the smallest
    eigenvalue (0.0 for an empty matrix)."""
    if cov.dim() < 2 or cov.shape[-1] != cov.shape[-2]:
        raise ValueError(
            f"{name} must be a square matrix (..., D, D), got shape {tuple(cov.shape)}"
        )
    tol = psd_tolerance(cov)
    asym = float((cov - cov.mT).abs().amax()) if cov.numel() else 0.0
    if asym > tol:
        raise ValueError(
            f"{name} must be symmetric, got max |{name} - {name}^T| = {asym:.3g} "
            f"(tolerance {tol:.1e})"
        )
    lam_min = float(torch.linalg.eigvalsh(0.5 * (cov + cov.mT)).min()) if cov.numel() else 0.0
    if lam_min < -tol:
        raise ValueError(
            f"{name} must be positive semi-definite, got smallest eigenvalue {lam_min:.3g} "
            f"(tolerance {tol:.1e})"
        )
    return lam_min


def check_sigma(Sigma, name: str = "Sigma") -> torch.Tensor:
    """A non-empty (d, d) positive definite (invertible) covariance, such as the input covariance of
    the regression model."""
    Sigma = as_tensor_arg(name, Sigma)
    if Sigma.dim() != 2 or Sigma.shape[0] != Sigma.shape[1] or Sigma.shape[0] == 0:
        raise ValueError(
            f"{name} must be a non-empty square matrix (d, d), got shape {tuple(Sigma.shape)}"
        )
    lam_min = check_psd(name, Sigma)
    if lam_min <= 0:
        raise ValueError(
            f"{name} must be positive definite (invertible), got smallest eigenvalue {lam_min:.3g}"
        )
    return Sigma


def check_measure(measure, name: str = "measure", *, finite_mgf: bool = False):
    """A softlin :class:`~softlin.measures.TokenMeasure`; with ``finite_mgf``, one whose MGF is finite."""
    from .measures import TokenMeasure

    if not isinstance(measure, TokenMeasure):
        raise TypeError(f"{name} must be a softlin TokenMeasure, got {type(measure).__name__}")
    if finite_mgf and not measure.has_finite_mgf:
        raise ValueError(
            f"{name} ({type(measure).__name__}) has no finite moment generating function away "
            "from 0, so the tilted law and the infinite-prompt limit do not exist"
        )
    return measure
