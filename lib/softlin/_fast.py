"""Speed behind one branch: tuned kernels that compute exactly what a readable function computes.

Each kernel here is selected by a single ``if`` in its caller and tested equal to the plain path (values
to rounding, gradients against autograd of the plain path); the book's pages show the plain path.
``bench/README.md`` explains the tuning and gives the measurements.

- :func:`streaming_tilted_mean`: :func:`softlin.attention.tilted_mean` for prompts longer than a core's
  cache, in one pass over memory (chosen by :func:`should_stream` in ``softmax_attention``).
"""

from __future__ import annotations

import math

import torch

# A chunk of tokens and its scores should stay in cache between the products that read it, so that each
# token comes from memory once; each chunk also costs about ten small torch calls. On the build machine
# (1 MiB of L2 per core, 32 MiB of L3) 4 MiB chunks balance the two best (bench/README.md).
CACHE_BYTES = 2**22
MIN_CHUNK = 2**10


def auto_chunk_size(tokens, n_queries):
    """The chunk length used when ``chunk_size`` is None: the largest power of two whose tokens and scores
    (over all batch dimensions) fit in ``CACHE_BYTES``, at least ``MIN_CHUNK``; None (one unchunked pass)
    when that covers the whole prompt."""
    L, D = tokens.shape[-2], tokens.shape[-1]
    per_token = tokens[..., 0, 0].numel() * (D + n_queries) * tokens.element_size()
    chunk = max(MIN_CHUNK, 2 ** int(math.floor(math.log2(max(CACHE_BYTES / per_token, 1.0)))))
    return None if chunk >= L else chunk


def should_stream(tokens, n_queries, chunk_size):
    """Whether ``softmax_attention`` takes :func:`streaming_tilted_mean`: a ``chunk_size`` shorter than the
    prompt was asked for, or none was and the prompt does not fit in the cache."""
    L = tokens.shape[-2]
    if chunk_size is None:
        chunk_size = auto_chunk_size(tokens, n_queries)
    return chunk_size is not None and chunk_size < L


def _scores(x, a, out=None):
    """Scores ``z_i^T a_q`` of tokens x (..., c, D) for directions a (..., Q, D), laid out (..., Q, c).

    One query: ``x @ a^T`` is a tall-skinny product that BLAS streams in one pass over the tokens, and its
    (..., c, 1) result is read as (..., 1, c). Several queries: ``a @ x^T``, so that the reductions over
    tokens run along contiguous memory. ``out``: a contiguous (..., Q, c) tensor to write into."""
    if a.shape[-2] == 1:
        return torch.matmul(x, a.mT, out=None if out is None else out.mT).mT
    return torch.matmul(a, x.mT, out=out)


def _tracks_gradients(*tensors):
    """Whether autograd or a torch.func transform watches any of the tensors (then the loop allocates its
    intermediates instead of writing into reusable buffers)."""
    wrapped = getattr(getattr(torch._C, "_functorch", None), "is_functorch_wrapped_tensor", None)
    for t in tensors:
        if t is None:
            continue
        if (torch.is_grad_enabled() and t.requires_grad) or wrapped is None or wrapped(t):
            return True
    return False


def streaming_tilted_mean(tokens, a, weights, chunk_size):
    """:func:`softlin.attention.tilted_mean` in one pass over memory, chunk by chunk.

    For each chunk c: its maximum score ``m_c``, ``s_c = sum_{i in c} w_i exp(score_i - m_c)`` and
    ``n_c = sum_{i in c} w_i exp(score_i - m_c) z_i``. A chunk is read from memory once and reused from cache
    by its two small products (the scores, then the weighted sum). At the end, with ``M = max_c m_c``, the mean is
    ``sum_c e^{m_c - M} n_c / sum_c e^{m_c - M} s_c`` (the rescaling of the online softmax, deferred to the
    end). Without gradients every chunk is written into the same preallocated buffers (fresh memory costs a
    page fault per 4 KiB on first touch); under autograd or ``torch.func`` the intermediates are fresh
    tensors, so the computation is an ordinary differentiable one. Inputs are trusted (validated by the
    caller); ``chunk_size`` None means :func:`auto_chunk_size`.
    """
    if chunk_size is None:
        chunk_size = auto_chunk_size(tokens, a.shape[-2])
    lead, L, D = tokens.shape[:-2], tokens.shape[-2], tokens.shape[-1]
    Q = a.shape[-2]
    n_chunks = -(-L // chunk_size)
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
        chunk = tokens[..., start:start + chunk_size, :]  # (..., c, D)
        buf = reuse and chunk.shape[-2] == chunk_size  # the last, shorter chunk gets fresh tensors
        scores = _scores(chunk, a, out=work if buf else None)  # (..., Q, c), ours to overwrite
        if weights is not None:
            w = weights[..., start:start + chunk_size]
            scores = scores.add_(torch.log(w, out=log_w if buf else None).unsqueeze(-2))
        m = torch.amax(scores.detach(), -1, out=maxima[i] if reuse else None)  # -inf if all weights are 0
        shift = m if weights is None else torch.where(torch.isfinite(m), m, torch.zeros_like(m))
        e = scores.sub_(shift.unsqueeze(-1)).exp_()
        s = torch.sum(e, -1, out=sums[i] if reuse else None)
        n = torch.matmul(e, chunk, out=numerators[i] if reuse else None)  # (..., Q, D)
        if not reuse:
            maxima.append(m)
            sums.append(s)
            numerators.append(n)
    if not reuse:
        maxima, sums, numerators = torch.stack(maxima), torch.stack(sums), torch.stack(numerators)
    scale = torch.exp(maxima - maxima.amax(0))  # e^{m_c - M}; 0 for chunks without weight
    n = (scale.unsqueeze(-1) * numerators).sum(0)  # (..., Q, D)
    s = (scale * sums).sum(0)  # (..., Q)
    return n / s.unsqueeze(-1)
