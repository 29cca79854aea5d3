"""The one place where softlin validates its inputs.

Every public function checks its arguments once, at the boundary, with these helpers; inner code and the
chapters' own code trust their inputs. Each error names the argument, what was received and what was
expected: a wrong type (None, a string, a list for a tensor, a float for a size) is a TypeError, a wrong
value (a shape, NaN, a non-PSD covariance, a size) a ValueError. Nothing is broadcast, truncated or
clipped silently. Sizes are checked before any work: what a call would allocate against the machine's
memory (:func:`check_memory`), the tokens a loop would draw against :data:`MAX_DRAWS`. Where several
arguments share a dimension, the one most of them agree on decides (:func:`common_dim`), so that one
wrong argument is the one the error names. The test ``tests/test_api_properties.py`` holds every public
name to this.

A public function whose formula other softlin code also needs is written as its formula under
:func:`validated_by`: the decorator runs the checks, the body trusts its arguments, and library code
that has already checked them calls ``fn.kernel``, the body alone. The page then shows the formula, with
the checks marked by the decorator line, and no argument is checked twice.
"""

from __future__ import annotations

import functools
import math
import numbers
import os

import numpy as np
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


def common_dim(sizes: dict) -> tuple[int, str]:
    """The size most of the arguments ``sizes`` (name -> size) agree on (ties: the first listed) and
    their names ("U and V"): checked against it, one wrong argument is the one an error blames."""
    values = list(sizes.values())
    D = max(values, key=lambda v: (values.count(v), -values.index(v)))
    agree = [n for n, v in sizes.items() if v == D]
    return D, ", ".join(agree[:-1]) + " and " * (len(agree) > 1) + agree[-1]


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


def check_positive_int(
    name: str, value, *, allow_none: bool = False, minimum: int = 1
) -> int | None:
    """An integer (``int`` or a NumPy integer, not a bool) of at least ``minimum``, returned as an ``int``.
    TypeError for another type (None, a string, a float such as 2.5 or 1e6), ValueError below ``minimum``."""
    if value is None and allow_none:
        return None
    want = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be {want}, got {value!r} ({type(value).__name__})")
    if value < minimum:
        raise ValueError(f"{name} must be {want}, got {value!r}")
    return int(value)


def check_bool(name: str, value) -> bool:
    """``True`` or ``False`` (a NumPy bool too); TypeError for anything else (None, a string, 0 or 1)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r} ({type(value).__name__})")
    return bool(value)


def check_real(name: str, value, *, positive: bool = False, nonneg: bool = False) -> float:
    """A finite real number (not a bool), optionally positive or non-negative; returned as a float."""
    try:
        finite = not isinstance(value, bool) and math.isfinite(value)
    except (TypeError, OverflowError):  # not a number, or an int beyond float
        finite = False
    if not finite or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a finite real number, got {value!r}")
    if positive and value <= 0:
        raise ValueError(f"{name} must be positive, got {value!r}")
    if nonneg and value < 0:
        raise ValueError(f"{name} must be non-negative, got {value!r}")
    return float(value)


def check_choice(name: str, value, choices: tuple) -> None:
    if not isinstance(value, type(choices[0])):
        raise TypeError(f"{name} must be one of {choices}, got {value!r} ({type(value).__name__})")
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")


def check_str(name: str, value) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, got {type(value).__name__}")
    return value


def check_callable(name: str, value) -> None:
    if not callable(value):
        raise TypeError(f"{name} must be callable (a function), got {type(value).__name__}")


def as_real_array(name: str, x, *, min_dim: int = 0, finite: bool = True) -> np.ndarray:
    """Real numbers (a number, a list, a NumPy array or a tensor) as a float64 array: TypeError for None,
    strings, booleans, complex numbers and other objects, ValueError for NaN/inf entries (when ``finite``)
    or fewer than ``min_dim`` dimensions."""
    if isinstance(x, torch.Tensor):
        if x.is_complex() or x.dtype == torch.bool:
            raise TypeError(f"{name} must hold real numbers, got a tensor of dtype {x.dtype}")
        arr = x.detach().cpu().double().numpy()
    else:
        try:
            arr = None if isinstance(x, (str, bytes)) or x is None else np.asarray(x)
        except (ValueError, TypeError):  # a ragged list
            arr = None
        if arr is None or arr.dtype.kind not in "iuf":
            what = type(x).__name__ if arr is None else f"{type(x).__name__} of {arr.dtype}"
            raise TypeError(
                f"{name} must be real numbers (a number, list, array or tensor), got {what}"
            )
        arr = arr.astype(np.float64)
    if arr.ndim < min_dim:
        raise ValueError(f"{name} must have at least {min_dim} dimension(s), got shape {arr.shape}")
    if finite and not np.all(np.isfinite(arr)):
        n_nan, n_inf = int(np.isnan(arr).sum()), int(np.isinf(arr).sum())
        raise ValueError(f"{name} must be finite, got {n_nan} NaN and {n_inf} inf entries")
    return arr


# --------------------------------------------------------------------------------------------------
# sizes: memory a call would allocate, and draws a loop would make, checked before the work starts

#: Most tokens one call draws (``L * n_prompts``): about three hours at 10^8 tokens a second. Beyond it a
#: call stops at once and says so instead of running for days; split such a run into several calls.
MAX_DRAWS = 10**12


def memory_limit(device=None) -> int:
    """Bytes of memory of the machine (CPU) or of the accelerator that holds ``device``."""
    device = torch.device("cpu" if device is None else device)
    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device).total_memory)
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def _bytes(n: float) -> str:
    return f"{n / 1e9:.3g} GB" if n >= 1e8 else f"{n / 1e6:.3g} MB"


def check_memory(names: str, n_bytes: float, *, device=None, what: str = "") -> None:
    """ValueError when a call would allocate ``n_bytes`` (estimated from its sizes, before allocating)
    beyond the memory of the machine; ``names`` says which arguments set the size (``"L = 10"``)."""
    limit = memory_limit(device)
    if n_bytes > limit:
        raise ValueError(
            f"{names}: {what or 'this call'} would need about {_bytes(n_bytes)} of memory, "
            f"more than the {_bytes(limit)} of this machine"
        )


def check_draws(names: str, n_draws: float, *, what: str = "tokens") -> None:
    """ValueError when a loop would draw more than :data:`MAX_DRAWS` tokens (``names`` as above)."""
    if n_draws > MAX_DRAWS:
        raise ValueError(
            f"{names}: {n_draws:.3g} {what} to draw, more than the {MAX_DRAWS:.0e} one call draws "
            "(about three hours at 10^8 a second); split the run into several calls"
        )


def check_dtype_device(dtype, device, *, optional_dtype: bool = False):
    """A floating-point torch dtype (or None when ``optional_dtype``) and a device (a torch.device, a
    string such as "cpu", or None: the default one); returned as ``(dtype, torch.device or None)``."""
    if not (optional_dtype and dtype is None) and not (
        isinstance(dtype, torch.dtype) and dtype.is_floating_point
    ):
        raise TypeError(
            f"dtype must be a floating-point torch dtype such as torch.float64, got {dtype!r}"
        )
    try:
        return dtype, None if device is None else torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise TypeError(
            f"device must be a torch.device or a string such as 'cpu' or 'cuda', got {device!r}"
        ) from exc


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
