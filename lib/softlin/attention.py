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

import math

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
    p = torch.softmax(_scores(tokens, queries @ U.mT, weights), dim=-1)
    return check_result_finite(p, "tokens", tokens)


# Streaming sizes. A chunk of tokens and its scores should stay in the core's L2 cache (2 MiB on the
# Xeon the book is built on; 1-2 MiB on current laptops) so that each token is read from memory once.
_CACHE_BYTES = 2**21
_MIN_CHUNK = 2**10  # shorter chunks cost more in per-chunk overhead than they save in cache misses
_BLOCK = 8  # float32, one query: see _block_diagonal


def _auto_chunk_size(tokens, n_queries):
    """The chunk length used when ``chunk_size`` is None: the largest power of two whose tokens and
    scores (over all batch dimensions) fit in ``_CACHE_BYTES``, at least ``_MIN_CHUNK``; None (one
    unchunked pass) when that covers the whole prompt."""
    L, D = tokens.shape[-2], tokens.shape[-1]
    per_token = tokens[..., 0, 0].numel() * (D + n_queries) * tokens.element_size()
    chunk = max(_MIN_CHUNK, 2 ** int(math.floor(math.log2(max(_CACHE_BYTES / per_token, 1.0)))))
    return None if chunk >= L else chunk


def _use_blocks(x, n_queries):
    """Whether the block-diagonal products apply: float32, one query, tokens (..., c, D) with c a
    multiple of _BLOCK and rows stored contiguously (so that (..., c, D) views as (..., c/8, 8 D))."""
    c, D = x.shape[-2], x.shape[-1]
    return (x.dtype == torch.float32 and n_queries == 1 and c % _BLOCK == 0 and c > 0
            and x.stride(-1) == 1 and x.stride(-2) == D)


def _block_diagonal(a):
    """``a`` (..., 1, D) -> (..., 8 D, 8) with eight copies of ``a^T`` on the block diagonal.

    MKL's float32 matrix-vector product with D = 6 columns runs at a fraction of memory speed; viewing
    eight consecutive tokens as one row of 8 D numbers turns both products of the softmax average
    (scores and weighted sum) into small matrix-matrix products, which are about twice as fast even
    though they multiply zeros. Exact: the extra terms are exact zeros (non-finite tokens still give a
    non-finite result, which the deferred check reports)."""
    eye = torch.eye(_BLOCK, dtype=a.dtype, device=a.device)
    D = a.shape[-1]
    blocks = a[..., 0, None, :, None] * eye[:, None, :]  # (..., 8, D, 8)
    return blocks.reshape(*a.shape[:-2], _BLOCK * D, _BLOCK)


def _raw_scores(x, a, blocks=None, out=None):
    """Scores ``z_i^T a_q`` of tokens x (..., c, D) for tilt directions a (..., Q, D), laid out (..., Q, c).

    One query: ``x @ a^T`` is a tall-skinny product that BLAS streams in one pass over the tokens, and its
    (..., c, 1) result is read as (..., 1, c). Several queries: ``a @ x^T`` directly, so that the
    reductions over tokens (max, sum) run along contiguous memory. ``out``: a contiguous (..., Q, c)
    tensor to write into (None: a new one)."""
    c, D = x.shape[-2], x.shape[-1]
    lead = x.shape[:-2]
    if a.shape[-2] == 1:
        if blocks is not None:
            res = torch.matmul(x.reshape(*lead, c // _BLOCK, _BLOCK * D), blocks,
                               out=None if out is None else out.view(*lead, c // _BLOCK, _BLOCK))
            return res.reshape(*lead, 1, c)
        return torch.matmul(x, a.mT, out=None if out is None else out.mT).mT
    return torch.matmul(a, x.mT, out=out)


def _weighted_sum(e, x, blocks=None, out=None):
    """``e @ x``: (..., Q, c) weights times tokens (..., c, D) -> (..., Q, D) (see _block_diagonal)."""
    if blocks is None:
        return torch.matmul(e, x, out=out)
    c, D = x.shape[-2], x.shape[-1]
    lead = x.shape[:-2]
    rows = c // _BLOCK
    full = e.reshape(*lead, rows, _BLOCK).mT @ x.reshape(*lead, rows, _BLOCK * D)  # (..., 8, 8 D)
    diag = full.reshape(*lead, _BLOCK, _BLOCK, D).diagonal(dim1=-3, dim2=-2)  # (..., D, 8)
    if out is None:
        return diag.sum(-1).unsqueeze(-2)
    torch.sum(diag, -1, out=out[..., 0, :])
    return out


def _scores(tokens, a, weights, blocks=None):
    """Scores (..., Q, L) of every token for the tilt directions ``a = U z`` (..., Q, D), plus log-weights."""
    scores = _raw_scores(tokens, a, blocks)
    if weights is not None:
        scores = scores + torch.log(weights).unsqueeze(-2)  # log 0 = -inf drops the token
    return scores


def _tracks_gradients(*tensors):
    """Whether autograd or a torch.func transform is watching any of the tensors (then the streaming loop
    allocates its intermediates instead of writing into reusable buffers)."""
    wrapped = getattr(getattr(torch._C, "_functorch", None), "is_functorch_wrapped_tensor", None)
    for t in tensors:
        if t is None:
            continue
        if (torch.is_grad_enabled() and t.requires_grad) or wrapped is None or wrapped(t):
            return True
    return False


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
        Stream over the prompt in chunks of this many tokens (extra memory O(chunk_size * Q) per prompt);
        the result equals the unchunked one to rounding. By default (None) a prompt longer than what
        fits in a 2 MiB cache (32 768 tokens of D = 6 in float64 with one query) is streamed in
        chunks of that size, and a shorter one takes one unchunked pass; a ``chunk_size`` of at least
        L forces the unchunked pass.

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
    (1e4 and beyond) give finite, exact results in float32 and float64. The cost is one pass over the
    tokens, at about the speed of ``tokens.sum(-2)`` for one query (``make bench`` measures it); works
    with autograd and ``torch.func`` in both the unchunked and the streamed form.
    """
    check_positive_int("chunk_size", chunk_size, allow_none=True)
    tokens, queries, U, V, weights = _validate(tokens, queries, U, V, weights)
    L = tokens.shape[-2]
    a = queries @ U.mT  # (..., Q, D): the tilt direction a = U z of each query
    if chunk_size is None:
        chunk_size = _auto_chunk_size(tokens, a.shape[-2])
    if chunk_size is None or chunk_size >= L:
        blocks = _block_diagonal(a) if _use_blocks(tokens, a.shape[-2]) else None
        p = torch.softmax(_scores(tokens, a, weights, blocks), dim=-1)  # (..., Q, L)
        out = _weighted_sum(p, tokens, blocks) @ V.mT  # tilted mean (..., Q, D), then V
    else:
        out = _streaming_softmax_attention(tokens, a, V, weights, chunk_size)
    return check_result_finite(out, "tokens", tokens)


def _streaming_softmax_attention(tokens, a, V, weights, chunk_size):
    """Softmax average in one pass over the prompt, chunk by chunk (the online softmax of Milakov &
    Gimelshein 2018, with the rescaling deferred to the end).

    For each chunk c: its maximum score ``m_c``, ``s_c = sum_{i in c} w_i exp(score_i - m_c)`` and
    ``n_c = sum_{i in c} w_i exp(score_i - m_c) z_i``. A chunk is read from memory once and reused from
    cache by its two small products. At the end, with ``M = max_c m_c``, the output is
    ``V sum_c e^{m_c - M} n_c / sum_c e^{m_c - M} s_c``. The shifts cancel exactly, so they are taken
    without gradient.

    Without gradients, every chunk is written into the same preallocated buffers: fresh memory costs a
    page fault per 4 KiB on first touch, which on virtual machines costs more than the arithmetic. Under
    autograd or ``torch.func`` the intermediates are fresh tensors (the in-place exponential only
    touches tensors that no other operation has saved), so the computation is an ordinary
    differentiable one."""
    lead, L, D = tokens.shape[:-2], tokens.shape[-2], tokens.shape[-1]
    Q = a.shape[-2]
    n_chunks = -(-L // chunk_size)
    blocks = _block_diagonal(a) if _use_blocks(tokens[..., :chunk_size, :], Q) else None
    reuse = not _tracks_gradients(tokens, a, weights)
    if reuse:
        kw = {"dtype": a.dtype, "device": a.device}
        maxima = torch.empty(n_chunks, *lead, Q, **kw)
        sums = torch.empty(n_chunks, *lead, Q, **kw)
        numerators = torch.empty(n_chunks, *lead, Q, D, **kw)
        work = torch.empty(*lead, Q, chunk_size, **kw)  # one chunk's scores, then their exponentials
        log_w = None if weights is None else torch.empty(*lead, chunk_size, **kw)
    else:
        maxima, sums, numerators = [], [], []
    for i, start in enumerate(range(0, L, chunk_size)):
        chunk = tokens[..., start : start + chunk_size, :]  # (..., c, D)
        full = chunk.shape[-2] == chunk_size
        use = blocks if blocks is not None and chunk.shape[-2] % _BLOCK == 0 else None
        buf = reuse and full  # the last, shorter chunk gets fresh tensors
        scores = _raw_scores(chunk, a, use, out=work if buf else None)  # (..., Q, c), ours to overwrite
        if weights is not None:
            w = weights[..., start : start + chunk_size]
            scores.add_(torch.log(w, out=log_w if buf else None).unsqueeze(-2))  # log 0 = -inf drops a token
        m = torch.amax(scores.detach(), -1, out=maxima[i] if reuse else None)  # -inf if all weights are 0
        shift = m if weights is None else torch.where(torch.isfinite(m), m, torch.zeros_like(m))
        e = scores.sub_(shift.unsqueeze(-1)).exp_()
        s = torch.sum(e, -1, out=sums[i] if reuse else None)
        n = _weighted_sum(e, chunk, use, out=numerators[i] if reuse else None)
        if not reuse:
            maxima.append(m)
            sums.append(s)
            numerators.append(n)
    if not reuse:
        maxima, sums, numerators = torch.stack(maxima), torch.stack(sums), torch.stack(numerators)
    scale = torch.exp(maxima - maxima.amax(0))  # e^{m_c - M}; 0 for chunks without weight
    n = (scale.unsqueeze(-1) * numerators).sum(0)  # (..., Q, D)
    s = (scale * sums).sum(0)  # (..., Q)
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
    scores = _raw_scores(tokens, queries @ U.mT)  # (..., Q, L)
    if weights is None:
        coef = scores / tokens.shape[-2]
    else:
        coef = scores * (weights / weights.sum(-1, keepdim=True)).unsqueeze(-2)
    return check_result_finite((coef @ tokens) @ V.mT, "tokens", tokens)
