"""The attention engine: softmax attention as a map on (weighted) empirical measures.

A prompt ``z_1, ..., z_L`` in R^D is the empirical measure ``mu_hat_L = (1/L) sum_i delta_{z_i}``, and
single-layer softmax attention of a query ``z`` over it is the paper's map (Section 2)

    T_{U,V}[mu_hat_L](z) = V sum_i softmax_i(z_i^T U z) z_i = V tilted_mean(tokens, U z),   U = K^T Q:

the value matrix applied to the mean of the prompt *tilted* towards ``a = U z``. Every softmax over prompt
tokens in softlin goes through this module:

- :func:`tilted_mean` is the plain definition (a softmax and a weighted sum);
- :class:`TiltedSums` is its online form: it consumes the tokens chunk by chunk (a stream drawn on the
  fly, or a prompt too long for memory) and also returns the tilted second moments and the effective
  sample size of the weights, which the concentration estimators, the regression model and the stability
  risks need; :func:`tilted_moments` runs it over a tensor;
- :func:`softmax_attention` applies ``V``; long prompts take the cache-sized streaming kernel of
  ``softlin._fast`` (one branch, tested equal to :func:`tilted_mean`).

Linear attention replaces the softmax weights by ``z_i^T a / L`` (:func:`linear_mean`). The query is not a
key: attention runs over the L prompt tokens only, with no mask and no positional encoding.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from . import _fast
from ._checks import (
    as_tensor_arg,
    check_bool,
    check_matrix,
    check_memory,
    check_positive_int,
    check_result_finite,
    check_same_dtype_device,
    check_weights,
    common_dim,
    validated_by,
)
from ._progress import progress

__all__ = [
    "TiltedMoments",
    "TiltedSums",
    "linear_attention",
    "linear_mean",
    "softmax_attention",
    "softmax_weights",
    "tilted_mean",
    "tilted_moments",
]


def _check_tokens_tilt(tokens, a, weights, *, chunk=False, a_name="a", typed=False):
    """tokens (..., L, D) with L, D >= 1; a (..., Q, D) with the same leading dimensions; weights (..., L)
    (all zero allowed for a ``chunk`` of a longer prompt). ``typed``: tokens and a are checked tensors."""
    if not typed:
        tokens = as_tensor_arg("tokens", tokens, min_dim=2, finite=False)  # checked via the result
        a = as_tensor_arg(a_name, a, min_dim=2)
    lead, (L, D) = tuple(tokens.shape[:-2]), tokens.shape[-2:]
    if L == 0 or D == 0:
        raise ValueError(
            f"tokens must hold at least one token (L >= 1) of dimension D >= 1, "
            f"got shape {tuple(tokens.shape)}"
        )
    if a.shape[-1] != D:
        raise ValueError(
            f"{a_name} must have last dimension D = {D} (that of tokens), got shape "
            f"{tuple(a.shape)}"
        )
    if tuple(a.shape[:-2]) != lead:
        raise ValueError(
            f"the leading (batch) dimensions of {a_name} must equal those of tokens, {lead}; "
            f"got {a_name} of shape {tuple(a.shape)} (no implicit broadcasting)"
        )
    if weights is not None:
        check_weights(
            as_tensor_arg("weights", weights), tuple(tokens.shape[:-1]), allow_zero_mass=chunk
        )
    check_same_dtype_device({"tokens": tokens, a_name: a, "weights": weights})


def _check_scores(tokens, n_queries, step, a_name="a"):
    """The scores of ``step`` tokens for every direction (and their exponentials) fit in memory."""
    n = tokens[..., :1, :1].numel() * n_queries * min(step, tokens.shape[-2])
    check_memory(
        f"tokens {tuple(tokens.shape)} and {a_name} ({n_queries} per prompt)",
        3 * n * tokens.element_size(),
        device=tokens.device,
        what="their scores",
    )


def _check_tilt(tokens, a, *, weights=None):
    _check_tokens_tilt(tokens, a, weights)
    _check_scores(tokens, a.shape[-2], tokens.shape[-2])


@validated_by(_check_tilt)
def tilted_mean(tokens, a, *, weights=None):
    """Mean of the prompt tilted towards ``a``: ``sum_i softmax_i(z_i^T a) z_i`` (paper Section 2).

    This is ``grad Lambda(a)`` for the prompt's empirical measure (``Lambda`` its log-MGF), and softmax
    attention is ``V tilted_mean(tokens, U z)``.

    Parameters
    ----------
    tokens : Tensor, shape (..., L, D)
    a : Tensor, shape (..., Q, D)   tilt directions, same leading dimensions as ``tokens``
    weights : Tensor, shape (..., L), optional; non-negative, not all zero: the weighted empirical measure
        ``sum_i w_i delta_{z_i} / sum_i w_i`` (integer weights equal duplicated tokens).

    Returns
    -------
    Tensor, shape (..., Q, D)

    Raises
    ------
    TypeError, ValueError
        Non-tensors, mismatched shapes, dtypes or devices, an empty prompt, bad weights, NaN/inf input.
    """
    scores = a @ tokens.mT  # (..., Q, L): the score z_i . a of each token for each direction
    if weights is not None:
        # log w_i; a zero weight (-inf) drops the token
        scores = scores + weights.log().unsqueeze(-2)
    # (..., Q, L): shifted by the maximum, so any finite score is safe
    p = torch.softmax(scores, dim=-1)
    out = p @ tokens  # (..., Q, D): the softmax-weighted mean
    check_result_finite(out, "tokens", tokens)  # validation
    return out


@validated_by(_check_tilt)
def linear_mean(tokens, a, *, weights=None):
    """Linear attention's counterpart of :func:`tilted_mean`: ``(1/L) sum_i (z_i^T a) z_i``.

    That is ``E[X X^T] a`` under the (weighted: ``sum_i w_i (...) / sum_i w_i``) empirical measure; shapes
    and errors as :func:`tilted_mean`.
    """
    scores = a @ tokens.mT  # (..., Q, L)
    if weights is None:
        coef = scores / tokens.shape[-2]
    else:
        coef = scores * (weights / weights.sum(-1, keepdim=True)).unsqueeze(-2)
    return check_result_finite(coef @ tokens, "tokens", tokens)  # (..., Q, D)


_NO_V = object()  # softmax_weights has no value matrix


def _check_weights_args(
    tokens, queries, U, *, weights=None, V=_NO_V, chunk_size=None, stream=False
):
    """As :func:`_check_tokens_tilt` for the queries, U (D, D) and V (D_out, D) (when the call has one)
    of the same dtype; D is that of most of them (one wrong argument is the one an error names); the
    scores of the prompt (with ``stream``: of a chunk of ``chunk_size`` tokens, by default cache-sized)
    fit in memory."""
    tokens = as_tensor_arg("tokens", tokens, min_dim=2, finite=False)  # checked via the result
    queries, U = as_tensor_arg("queries", queries, min_dim=2), as_tensor_arg("U", U)
    V = None if V is _NO_V else as_tensor_arg("V", V)
    named = {"tokens": tokens, "queries": queries, "U": U, "V": V}
    D, agree = common_dim(
        {k: x.shape[-1] if x.dim() else 0 for k, x in named.items() if x is not None}
    )
    if tokens.shape[-1] != D:
        raise ValueError(
            f"tokens must have last dimension D = {D} (that of {agree}), got shape "
            f"{tuple(tokens.shape)}"
        )
    _check_tokens_tilt(tokens, queries, weights, a_name="queries", typed=True)
    if U.dim() != 2 or U.shape[0] != U.shape[1]:
        raise ValueError(
            f"U must be a square matrix of shape (D, D) = ({D}, {D}), got {tuple(U.shape)}"
        )
    check_matrix("U", U, D, D)
    if V is not None:
        check_matrix("V", V, None, D)
    check_same_dtype_device({"tokens": tokens, "U": U, "V": V})
    Q, L = queries.shape[-2], tokens.shape[-2]
    step = chunk_size or _fast.auto_chunk_size(tokens, Q) or L if stream else L
    _check_scores(tokens, Q, step, "queries")


def _check_attention(tokens, queries, U, V, *, weights=None, chunk_size=None):
    """:func:`_check_weights_args` with a value matrix V and a positive ``chunk_size`` or None."""
    check_positive_int("chunk_size", chunk_size, allow_none=True)
    _check_weights_args(
        tokens, queries, U, weights=weights, V=V, chunk_size=chunk_size, stream=True
    )


def _check_linear(tokens, queries, U, V, *, weights=None):
    _check_weights_args(tokens, queries, U, weights=weights, V=V)


@validated_by(_check_weights_args)
def softmax_weights(tokens, queries, U, *, weights=None):
    """Softmax attention weights ``p_{q,i} ∝ w_i exp(z_i^T U z_q)`` of each query over the prompt.

    Shapes: tokens (..., L, D), queries (..., Q, D), U (D, D), weights (..., L) -> (..., Q, L), rows summing
    to one. Errors as :func:`softmax_attention`.
    """
    scores = queries @ U.mT @ tokens.mT  # (..., Q, L)
    if weights is not None:
        scores = scores + weights.log().unsqueeze(-2)
    return check_result_finite(torch.softmax(scores, dim=-1), "tokens", tokens)


@validated_by(_check_attention)
def softmax_attention(tokens, queries, U, V, *, weights=None, chunk_size=None):
    """Softmax attention of each query over a prompt: ``T_{U,V}[mu_hat_L](z)`` (paper Section 2).

    Parameters
    ----------
    tokens : Tensor, shape (..., L, D)
        The prompt tokens ``z_1..z_L`` (keys and values); ``...`` are batch dimensions.
    queries : Tensor, shape (..., Q, D)
        Query tokens, with exactly the same leading dimensions as ``tokens``.
    U : Tensor, shape (D, D)
        Merged key-query matrix ``U = K^T Q``; the score of token ``z_i`` for query ``z`` is ``z_i^T U z``.
    V : Tensor, shape (D_out, D)
        Value matrix (output map folded in).
    weights : Tensor, shape (..., L), optional
        Non-negative token weights, not all zero: the prompt is then the weighted empirical measure
        ``sum_i w_i delta_{z_i} / sum_i w_i``. Integer weights equal duplicated tokens.
    chunk_size : int, optional
        Stream over the prompt in chunks of this many tokens (extra memory O(chunk_size * Q) per prompt);
        the result equals the unchunked one to rounding. By default (None) a prompt longer than a cache-sized
        chunk (2^16 tokens of D = 6 in float64 with one query: 4 MiB of tokens and scores) is streamed in
        such chunks, a shorter one takes one pass of :func:`tilted_mean`; a ``chunk_size`` of at least L
        forces that pass.

    Returns
    -------
    Tensor, shape (..., Q, D_out)

    Raises
    ------
    TypeError
        If an argument is not a floating-point tensor.
    ValueError
        On mismatched D, non-square U, empty prompt, bad weights, non-positive chunk size, NaN/inf input,
        mismatched batch dimensions, dtypes or devices.

    Notes
    -----
    Scores are shifted by a maximum score before exponentiation, so scores of any finite magnitude (1e4 and
    beyond) give finite, exact results in float32 and float64. Differentiable (autograd, ``torch.func``)
    in both forms.
    """
    a = queries @ U.mT  # (..., Q, D): the tilt direction U z of each query
    if _fast.should_stream(tokens, a.shape[-2], chunk_size):  # a long prompt: cache-sized chunks
        mean = _streaming_tilted_mean(tokens, a, weights, chunk_size)
    else:
        mean = tilted_mean.kernel(tokens, a, weights=weights)
    return check_result_finite(mean @ V.mT, "tokens", tokens)


@validated_by(_check_linear)
def linear_attention(tokens, queries, U, V, *, weights=None):
    """Normalised linear attention ``(1/L) sum_i (z_i^T U z) V z_i`` (Section 2 of the paper).

    In the measure language this is ``T_lin[mu](z) = V E_mu[z' z'^T] U z`` at the prompt's empirical
    measure (weighted: ``sum_i w_i (...) / sum_i w_i``). Parameters, shapes and errors as
    :func:`softmax_attention` (without ``chunk_size``); returns (..., Q, D_out).
    """
    return linear_mean.kernel(tokens, queries @ U.mT, weights=weights) @ V.mT


class TiltedMoments(NamedTuple):
    """Moments of the softmax weights ``p_i ∝ w_i exp(z_i^T a)`` over a prompt (:class:`TiltedSums`).

    Shapes: ``...`` are the leading dimensions and Q the number of tilt directions.
    """

    mean: torch.Tensor  #: (..., Q, D), ``sum_i p_i z_i``
    second: torch.Tensor | None  #: (..., Q, D, D), ``sum_i p_i z_i z_i^T`` (None unless asked for)
    ess: torch.Tensor  #: (..., Q), effective sample size ``1 / sum_i p_i^2`` (1 to L)
    max_weight: torch.Tensor  #: (..., Q), ``max_i p_i``

    @property
    def covariance(self) -> torch.Tensor:
        """(..., Q, D, D): the tilted covariance ``sum_i p_i (z_i - m)(z_i - m)^T``."""
        if self.second is None:
            raise ValueError(
                "the second moments were not accumulated: use TiltedSums(a, second=True)"
            )
        return self.second - self.mean.unsqueeze(-1) * self.mean.unsqueeze(-2)


class TiltedSums:
    """Online softmax over a stream of token chunks: :func:`tilted_mean` one chunk at a time.

    For each direction it keeps the running maximum score ``M`` and the shifted sums
    ``s0 = sum_i w_i e_i``, ``s1 = sum_i w_i e_i z_i``, ``s2 = sum_i w_i e_i z_i z_i^T`` and
    ``s00 = sum_i (w_i e_i)^2`` with ``e_i = exp(z_i^T a - M)``; a new chunk with a larger maximum rescales
    them by ``exp(M_old - M_new)`` (the online softmax of Milakov & Gimelshein, 2018). The result does not
    depend on how the prompt is cut into chunks (to rounding), and memory is that of one chunk.

    Parameters
    ----------
    a : Tensor, shape (..., Q, D)
        Tilt directions (``U z`` for queries ``z``); the leading dimensions ``...`` are those of every
        chunk of tokens (use ``a.expand`` to share directions across prompts).
    second : bool
        Also accumulate the second moments (needed for the tilted covariance).

    Examples
    --------
    >>> sums = TiltedSums(a)                     # doctest: +SKIP
    >>> for chunk in chunks: sums.update(chunk)  # doctest: +SKIP
    >>> sums.moments().mean                      # doctest: +SKIP
    """

    def __init__(self, a, *, second: bool = False):
        self._start(as_tensor_arg("a", a, min_dim=2), check_bool("second", second))

    def _start(self, a, second):
        self.a, self.second, self.n_tokens = a, bool(second), 0
        self.max = self.s0 = self.s1 = self.s2 = self.s00 = None
        return self

    def update(self, tokens, weights=None):
        """Add a chunk of tokens (..., c, D) (weights (..., c), optional) to the sums. Returns self."""
        _check_tokens_tilt(tokens, self.a, weights, chunk=True)
        return self._update(tokens, weights)

    def _update(self, tokens, weights):
        """:meth:`update` on a checked chunk: the online softmax step."""
        scores = self.a @ tokens.mT  # (..., Q, c)
        if weights is not None:
            scores = scores + weights.log().unsqueeze(-2)
        # (..., Q); the shift cancels, so no gradient through it
        chunk_max = scores.detach().amax(-1)
        new_max = chunk_max if self.max is None else torch.maximum(self.max, chunk_max)
        # a prompt whose weights are all zero so far has no maximum: shift it by 0
        shift = torch.where(torch.isfinite(new_max), new_max, torch.zeros_like(new_max))
        e = torch.exp(scores - shift.unsqueeze(-1))  # (..., Q, c): w_i e_i
        D = tokens.shape[-1]
        if self.second:
            # one product gives s1 and s2: the weights times the tokens [z_i, vec(z_i z_i^T)]
            zz = tokens.unsqueeze(-1) * tokens.unsqueeze(-2)  # (..., c, D, D)
            # (..., Q, D + D^2), summed in sub-blocks for float32 accuracy (softlin._fast.weighted_sum)
            both = _fast.weighted_sum(e, torch.cat([tokens, zz.flatten(-2)], dim=-1))
            s1, s2 = both[..., :D], both[..., D:].unflatten(-1, (D, D))
        else:
            s1, s2 = _fast.weighted_sum(e, tokens), None  # (..., Q, D): e @ tokens
        sums = [e.sum(-1), s1, (e * e).sum(-1)] + ([s2] if self.second else [])  # s0, s1, s00, s2
        if self.max is not None:  # rescale the old sums to the new maximum
            # (..., Q)
            r = torch.exp(torch.where(torch.isfinite(self.max), self.max, shift) - shift)
            old = [self.s0, self.s1, self.s00] + ([self.s2] if self.second else [])
            scale = [r, r.unsqueeze(-1), r * r, r[..., None, None]]
            sums = [o * s + n for o, s, n in zip(old, scale, sums)]
        self.s0, self.s1, self.s00 = sums[:3]
        self.s2 = sums[3] if self.second else None
        self.max = new_max
        self.n_tokens += tokens.shape[-2]
        return self

    def moments(self) -> TiltedMoments:
        """The tilted moments of all tokens seen so far (raises ValueError before the first chunk)."""
        if self.max is None:
            raise ValueError("no tokens yet: call update(tokens) at least once")
        if bool((self.s0 <= 0).any()):
            raise ValueError("the weights of the tokens seen so far are all zero for some prompt")
        mean = self.s1 / self.s0.unsqueeze(-1)
        second = None if self.s2 is None else self.s2 / self.s0[..., None, None]
        # the largest shifted weight is exactly 1 (the maximum), so max_i p_i = 1 / s0
        return TiltedMoments(mean, second, self.s0**2 / self.s00, 1.0 / self.s0)


def _run_tilted_sums(tokens, a, weights, step, *, second=False) -> TiltedSums:
    """:class:`TiltedSums` over checked ``tokens`` in chunks of ``step`` tokens."""
    sums = TiltedSums.__new__(TiltedSums)._start(a, second)
    work = tokens.numel() * a.shape[-2] * (1 + second * tokens.shape[-1])
    for start in progress(range(0, tokens.shape[-2], step), work=work, rate=1e8):
        w = None if weights is None else weights[..., start : start + step]
        sums._update(tokens[..., start : start + step, :], w)
    return sums


def _streaming_tilted_mean(tokens, a, weights, chunk_size):
    """:func:`tilted_mean` over checked inputs in chunks (default: cache-sized): the one-pass kernel of
    ``softlin._fast``, or where it does not apply (gradients tracked, an exponential that would
    overflow) the online softmax of :class:`TiltedSums`, differentiable and overflow-safe."""
    step = _fast.auto_chunk_size(tokens, a.shape[-2]) if chunk_size is None else chunk_size
    mean = _fast.streaming_tilted_mean(tokens, a, weights, step)
    if mean is None:
        sums = _run_tilted_sums(tokens, a, weights, step)
        mean = sums.s1 / sums.s0.unsqueeze(-1)
    return mean


def _check_moments(tokens, a, *, weights=None, second=False, chunk_size=None):
    check_positive_int("chunk_size", chunk_size, allow_none=True)
    check_bool("second", second)
    _check_tokens_tilt(tokens, a, weights)
    D = tokens.shape[-1]
    _check_scores(tokens, a.shape[-2] * (1 + D * second), chunk_size or tokens.shape[-2])


@validated_by(_check_moments)
def tilted_moments(tokens, a, *, weights=None, second: bool = False, chunk_size: int | None = None):
    """:class:`TiltedMoments` of the prompt ``tokens`` (..., L, D) for the directions ``a`` (..., Q, D).

    Runs :class:`TiltedSums` over the prompt in chunks of ``chunk_size`` tokens (default: one chunk); the
    result does not depend on the chunking (to rounding). ``weights`` (..., L) as :func:`tilted_mean`.
    """
    step = tokens.shape[-2] if chunk_size is None else chunk_size
    out = _run_tilted_sums(tokens, a, weights, step, second=second).moments()
    check_result_finite(out.mean, "tokens", tokens)
    return out
