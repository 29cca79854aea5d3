"""Finite-prompt attention as a map on (weighted) empirical measures.

A prompt ``z_1, ..., z_L`` in R^D defines the empirical measure ``mu_hat_L = (1/L) sum_i delta_{z_i}``.
Single-layer softmax attention of a query ``z`` over the prompt is the paper's map

    T_{U,V}[mu_hat_L](z) = sum_i softmax_i(z_i^T U z) V z_i ,        U = K^T Q,

and normalised linear attention is ``(1/L) sum_i (z_i^T U z) V z_i`` (paper-notes section 2). The query is
not a key: attention runs over the L prompt tokens only, with no mask and no positional encoding.

Both functions compute the (tilted) mean of the tokens first and apply ``V`` last, so the cost is one
pass over the tokens per query and no ``(L, D_out)`` value array is formed.
"""

from __future__ import annotations

import torch

from ._checks import (
    as_tensor_arg,
    check_matrix,
    check_result_finite,
    check_positive_int,
    check_same_dtype_device,
    check_weights,
)

__all__ = ["softmax_attention", "linear_attention", "softmax_weights"]


def _validate(tokens, queries, U, V, weights):
    tokens = as_tensor_arg("tokens", tokens, min_dim=2, finite=False)  # checked via the result
    queries = as_tensor_arg("queries", queries, min_dim=2)
    U = as_tensor_arg("U", U)
    V = None if V is None else as_tensor_arg("V", V)
    L, D = tokens.shape[-2], tokens.shape[-1]
    if L == 0:
        raise ValueError(f"tokens must hold at least one token (L >= 1), got shape {tuple(tokens.shape)}")
    if D == 0:
        raise ValueError(f"tokens must have a non-empty token dimension D, got shape {tuple(tokens.shape)}")
    if queries.shape[-1] != D:
        raise ValueError(
            f"queries must have last dimension D = {D} (the token dimension of tokens), "
            f"got queries of shape {tuple(queries.shape)}"
        )
    if U.dim() != 2 or U.shape[0] != U.shape[1]:
        raise ValueError(f"U must be a square matrix of shape (D, D) = ({D}, {D}), got {tuple(U.shape)}")
    check_matrix("U", U, D, D)
    if V is not None:
        check_matrix("V", V, None, D)
    if tuple(queries.shape[:-2]) != tuple(tokens.shape[:-2]):
        raise ValueError(
            f"the leading (batch) dimensions of queries must equal those of tokens, {tuple(tokens.shape[:-2])}; "
            f"got queries of shape {tuple(queries.shape)} (no implicit broadcasting)"
        )
    if weights is not None:
        weights = as_tensor_arg("weights", weights)
        check_weights(weights, tuple(tokens.shape[:-1]))
    check_same_dtype_device({"tokens": tokens, "queries": queries, "U": U, "V": V, "weights": weights})
    return tokens, queries, U, V, weights


def softmax_weights(tokens, queries, U, *, weights=None):
    """Softmax attention weights ``p_{q,i} ∝ w_i exp(z_i^T U z_q)`` of each query over the prompt.

    Parameters
    ----------
    tokens : Tensor, shape (..., L, D)
    queries : Tensor, shape (..., Q, D)
    U : Tensor, shape (D, D)
    weights : Tensor, shape (..., L), optional; non-negative, not all zero.

    Returns
    -------
    Tensor, shape (..., Q, L); each row sums to one.
    """
    tokens, queries, U, _, weights = _validate(tokens, queries, U, None, weights)
    p = torch.softmax(_scores(tokens, queries, U, weights), dim=-2).mT
    return check_result_finite(p, "tokens", tokens)


def _scores(tokens, queries, U, weights):
    """Scores laid out as (..., L, Q): ``tokens @ (U z)`` is a tall-skinny product that BLAS streams in one
    pass over the tokens (the (Q, D) x (D, L) orientation takes a much slower path for small Q)."""
    a = queries @ U.mT  # (..., Q, D): the tilt direction a = U z for each query
    scores = tokens @ a.mT  # (..., L, Q): z_i^T U z
    if weights is not None:
        scores = scores + torch.log(weights).unsqueeze(-1)  # log 0 = -inf drops the token
    return scores


def softmax_attention(tokens, queries, U, V, *, weights=None, chunk_size=None):
    """Softmax attention of each query over a prompt: ``T_{U,V}[mu_hat_L](z)`` (paper section 2).

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
        Stream over the prompt in chunks of this many tokens with a running maximum and running sums
        (extra memory O(chunk_size * Q)); the result equals the unchunked one to rounding.

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
    Scores are shifted by their maximum before exponentiation, so scores of any finite magnitude
    (1e4 and beyond) give finite, exact results in float32 and float64.
    """
    check_positive_int("chunk_size", chunk_size, allow_none=True)
    tokens, queries, U, V, weights = _validate(tokens, queries, U, V, weights)
    L = tokens.shape[-2]
    if chunk_size is None or chunk_size >= L:
        p = torch.softmax(_scores(tokens, queries, U, weights), dim=-2)  # (..., L, Q)
        out = (p.mT @ tokens) @ V.mT  # tilted mean (..., Q, D), then V
    else:
        out = _streaming_softmax_attention(tokens, queries, U, V, weights, chunk_size)
    return check_result_finite(out, "tokens", tokens)


def _streaming_softmax_attention(tokens, queries, U, V, weights, chunk_size):
    """Online softmax (Milakov & Gimelshein 2018): one pass over the prompt keeping the running max ``m``,
    the running normaliser ``s = sum_i w_i exp(score_i - m)`` and the running numerator
    ``n = sum_i w_i exp(score_i - m) z_i``. A chunk of ``chunk_size`` tokens is read from memory once and
    reused from cache by the two small products."""
    a_t = (queries @ U.mT).mT  # (..., D, Q)
    lead_q = a_t.shape[:-2] + a_t.shape[-1:]  # (..., Q)
    m = torch.full(lead_q, float("-inf"), dtype=a_t.dtype, device=a_t.device)
    s = torch.zeros(lead_q, dtype=a_t.dtype, device=a_t.device)
    n = torch.zeros(lead_q + tokens.shape[-1:], dtype=a_t.dtype, device=a_t.device)  # (..., Q, D)
    L = tokens.shape[-2]
    for start in range(0, L, chunk_size):
        chunk = tokens[..., start : start + chunk_size, :]  # (..., c, D)
        sc = chunk @ a_t  # (..., c, Q)
        if weights is not None:
            sc = sc + torch.log(weights[..., start : start + chunk_size]).unsqueeze(-1)
        m_new = torch.maximum(m, sc.amax(-2))
        # Before any token with positive weight has been seen, m_new is -inf; shift by 0 instead.
        shift = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
        rescale = torch.exp(m - shift)  # 0 on the first contributing chunk
        e = torch.exp(sc - shift.unsqueeze(-2))  # (..., c, Q)
        s = s * rescale + e.sum(-2)
        n = n * rescale.unsqueeze(-1) + e.mT @ chunk
        m = m_new
    return (n / s.unsqueeze(-1)) @ V.mT


def linear_attention(tokens, queries, U, V, *, weights=None):
    """Normalised linear attention ``(1/L) sum_i (z_i^T U z) V z_i`` (paper-notes section 2).

    In the measure language this is ``T_lin[mu](z) = V E_mu[z' z'^T] U z``, evaluated at the empirical
    measure of the prompt (weighted: ``sum_i w_i (...) / sum_i w_i``).

    Parameters and shapes are those of :func:`softmax_attention` (without ``chunk_size``).

    Returns
    -------
    Tensor, shape (..., Q, D_out)

    Raises
    ------
    TypeError, ValueError
        As :func:`softmax_attention`.
    """
    tokens, queries, U, V, weights = _validate(tokens, queries, U, V, weights)
    scores = tokens @ (queries @ U.mT).mT  # (..., L, Q)
    if weights is None:
        coef = scores / tokens.shape[-2]
    else:
        coef = scores * (weights / weights.sum(-1, keepdim=True)).unsqueeze(-1)
    return check_result_finite((coef.mT @ tokens) @ V.mT, "tokens", tokens)
