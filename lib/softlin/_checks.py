"""Input validation shared by the public functions of :mod:`softlin`.

Every public function validates its arguments once, at the boundary, with these helpers; inner code
trusts its inputs. Each error names the argument, what was received and what was expected. Nothing is
broadcast, truncated or clipped silently.
"""

from __future__ import annotations

import torch

__all__ = [
    "as_tensor_arg",
    "check_result_finite",
    "check_finite",
    "check_generator",
    "check_matrix",
    "check_positive_int",
    "check_psd",
    "check_same_leading",
    "check_weights",
]


def as_tensor_arg(name: str, x, *, min_dim: int = 0, finite: bool = True) -> torch.Tensor:
    """Return ``x`` if it is a floating-point tensor with at least ``min_dim`` dimensions and (when
    ``finite``) no NaN/inf. Callers that pass ``finite=False`` for a large input must check their result
    instead (see :func:`check_result_finite`)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not torch.is_floating_point(x):
        raise TypeError(f"{name} must be a floating-point tensor (float32 or float64), got dtype {x.dtype}")
    if x.dim() < min_dim:
        raise ValueError(
            f"{name} must have at least {min_dim} dimension(s), got shape {tuple(x.shape)}"
        )
    if finite:
        check_finite(name, x)
    return x


def check_result_finite(result: torch.Tensor, name: str, x: torch.Tensor) -> torch.Tensor:
    """Deferred finiteness check of a large input ``x``: NaN or inf anywhere in ``x`` propagates to a
    non-finite ``result`` (IEEE arithmetic: 0 * inf and inf - inf are NaN), so scanning the small result
    replaces a full extra pass over ``x``. Only when the result is non-finite is ``x`` scanned, to report
    exactly what was wrong."""
    if bool(torch.isfinite(result).all()):
        return result
    check_finite(name, x)
    raise ValueError(
        f"the result is not finite although {name} is: the scores overflowed the dtype {x.dtype}; "
        f"rescale {name} or U"
    )


def check_finite(name: str, x: torch.Tensor) -> None:
    if x.numel() and not bool(torch.isfinite(x).all()):
        n_nan = int(torch.isnan(x).sum())
        n_inf = int(torch.isinf(x).sum())
        raise ValueError(f"{name} must be finite, got {n_nan} NaN and {n_inf} inf entries")


def check_matrix(name: str, x: torch.Tensor, rows: int | None, cols: int | None) -> None:
    """Check that ``x`` is a 2-D tensor of shape (rows, cols); ``None`` leaves a side free."""
    if x.dim() != 2 or (rows is not None and x.shape[0] != rows) or (cols is not None and x.shape[1] != cols):
        want = f"({'any' if rows is None else rows}, {'any' if cols is None else cols})"
        raise ValueError(f"{name} must have shape {want}, got {tuple(x.shape)}")


def check_same_leading(name: str, x: torch.Tensor, lead: tuple, ref_name: str) -> None:
    if tuple(x.shape[: len(lead)]) != tuple(lead) or x.dim() - len(lead) < 0:
        raise ValueError(
            f"the leading (batch) dimensions of {name} must equal those of {ref_name}, {tuple(lead)}; "
            f"got {name} of shape {tuple(x.shape)} (no implicit broadcasting)"
        )


def check_same_dtype_device(named: dict) -> None:
    items = [(k, v) for k, v in named.items() if v is not None]
    k0, v0 = items[0]
    for k, v in items[1:]:
        if v.dtype != v0.dtype:
            raise ValueError(f"{k} has dtype {v.dtype} but {k0} has dtype {v0.dtype}; use one dtype")
        if v.device != v0.device:
            raise ValueError(f"{k} is on {v.device} but {k0} is on {v0.device}; use one device")


def check_weights(weights: torch.Tensor, expected_shape: tuple) -> None:
    """Weights of a weighted empirical measure: shape ``expected_shape``, non-negative, not all zero."""
    if tuple(weights.shape) != tuple(expected_shape):
        raise ValueError(f"weights must have shape {tuple(expected_shape)} (one per token), got {tuple(weights.shape)}")
    if weights.numel() and bool((weights < 0).any()):
        raise ValueError(f"weights must be non-negative, got minimum {float(weights.min()):.3g}")
    if weights.numel() and bool((weights.sum(-1) <= 0).any()):
        raise ValueError("weights must not be all zero for any prompt (the measure would have zero mass)")


def check_positive_int(name: str, value, *, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def check_generator(generator) -> None:
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")


def check_psd(name: str, cov: torch.Tensor) -> None:
    """Symmetric positive semi-definite, up to a rounding tolerance relative to the largest entry."""
    if cov.dim() < 2 or cov.shape[-1] != cov.shape[-2]:
        raise ValueError(f"{name} must be a square matrix (..., D, D), got shape {tuple(cov.shape)}")
    eps = torch.finfo(cov.dtype).eps
    scale = float(cov.abs().amax()) if cov.numel() else 0.0
    tol = 1e3 * eps * max(scale, 1.0)
    asym = float((cov - cov.transpose(-1, -2)).abs().amax()) if cov.numel() else 0.0
    if asym > tol:
        raise ValueError(f"{name} must be symmetric, got max |{name} - {name}^T| = {asym:.3g} (tolerance {tol:.1e})")
    lam_min = float(torch.linalg.eigvalsh(0.5 * (cov + cov.transpose(-1, -2))).min())
    if lam_min < -tol:
        raise ValueError(
            f"{name} must be positive semi-definite, got smallest eigenvalue {lam_min:.3g} (tolerance {tol:.1e})"
        )
