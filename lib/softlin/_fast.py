"""Speed behind one branch: tuned kernels that compute exactly what a readable function computes.

Each kernel here is selected by a single ``if`` in its caller and tested equal to the plain path (values
to rounding, gradients against autograd of the plain path); the book's pages show the plain path.
``bench/README.md`` explains the tuning and gives the measurements.

- :func:`streaming_tilted_mean`: :func:`softlin.attention.tilted_mean` for prompts longer than a core's
  cache, in one pass over memory (chosen by :func:`should_stream`; where it does not apply it returns
  None and its caller takes the online softmax).
"""

from __future__ import annotations

import math

import torch

from ._progress import progress

# A chunk of tokens and its scores should stay in cache between the products that read it, so that each
# token comes from memory once; each chunk also costs about ten small torch calls. On the build machine
# (1 MiB of L2 per core, 32 MiB of L3) 4 MiB chunks balance the two best (bench/README.md).
CACHE_BYTES = 2**22
MIN_CHUNK = 2**10
SUB_BLOCKS = 8  # see weighted_sum


def auto_chunk_size(tokens, n_queries):
    """The chunk length used when ``chunk_size`` is None: the largest power of two whose tokens and scores
    (over all batch dimensions) fit in ``CACHE_BYTES``, at least ``MIN_CHUNK``; None (one unchunked pass)
    when that covers the whole prompt."""
    L, D = tokens.shape[-2], tokens.shape[-1]
    per_token = tokens[..., 0, 0].numel() * (D + n_queries) * tokens.element_size()
    chunk = max(MIN_CHUNK, 2 ** math.floor(math.log2(max(CACHE_BYTES / per_token, 1.0))))
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


def weighted_sum(e, x):
    """``e @ x`` for weights (..., Q, c) and tokens (..., c, D), as ``SUB_BLOCKS`` shorter products added up.

    BLAS accumulates a long matrix-vector product in one running sum, so its float32 rounding grows with
    the chunk length (1e-4 relative at 2^17 terms, measured); eight products of c/8 terms, summed, cost
    little more and are 100x more accurate. Exact splits only: other shapes take one product."""
    c = x.shape[-2]
    if c % SUB_BLOCKS or c < 64 * SUB_BLOCKS:
        return torch.matmul(e, x)
    lead, Q, D = x.shape[:-2], e.shape[-2], x.shape[-1]
    es = e.reshape(*lead, Q, SUB_BLOCKS, c // SUB_BLOCKS).transpose(-3, -2)  # (..., S, Q, c/S)
    return torch.matmul(es, x.reshape(*lead, SUB_BLOCKS, c // SUB_BLOCKS, D)).sum(-3)  # (..., Q, D)


def _tracks_gradients(*tensors):
    """Whether autograd or a torch.func transform watches any of the tensors."""
    wrapped = getattr(getattr(torch._C, "_functorch", None), "is_functorch_wrapped_tensor", None)
    for t in tensors:
        if t is None:
            continue
        if (torch.is_grad_enabled() and t.requires_grad) or wrapped is None or wrapped(t):
            return True
    return False


def streaming_tilted_mean(tokens, a, weights, chunk_size):
    """:func:`softlin.attention.tilted_mean` in one pass over memory: a chunk is read once and reused
    from cache by its two small products (scores, then weighted sum), :func:`_one_shift_pass`. Returns
    None where it does not apply: under autograd or ``torch.func`` (no backward pass is written here), or
    when an exponential would overflow; the caller then takes the online softmax of
    :class:`softlin.attention.TiltedSums` (the one implementation of it; this module imports nothing of
    softlin). Inputs are trusted (validated by the caller); ``chunk_size``: tokens per chunk."""
    if _tracks_gradients(tokens, a, weights):
        return None
    return _one_shift_pass(tokens, a, weights, chunk_size)


def _one_shift_pass(tokens, a, weights, c):
    """Every chunk's exponentials shifted by one number, the first chunk's largest score ``m``:
    ``e_i = w_i exp(score_i - m)``, so the chunk sums ``sum_i e_i`` and ``sum_i e_i z_i`` add up with no
    rescaling and few calls per chunk. The largest ``e_i`` is at least 1, so nothing that matters underflows; a later
    score far above ``m`` would overflow, and then (or when the first chunk has no weight) this returns
    None. In base 2: scores along ``a log2(e)`` and ``exp2``, 3.5-4.6x faster than ``exp`` in torch and
    equal to rounding. The scores go into one reused buffer (fresh memory costs a page
    fault per 4 KiB on first touch)."""
    lead, L, Q = tokens.shape[:-2], tokens.shape[-2], a.shape[-2]
    work = torch.empty(*lead, Q, c, dtype=a.dtype, device=a.device)
    a2, shift, n, s = a * math.log2(math.e), None, [], []
    # a bar beyond a few seconds: about 1e9 token coordinates a second, per (2 + Q), measured
    for start in progress(range(0, L, c), work=tokens.numel() * (2 + Q), rate=1e9):
        x = tokens[..., start : start + c, :]  # (..., c, D)
        e = _scores(x, a2, out=work if x.shape[-2] == c else None)  # (..., Q, c), in base 2
        w = None if weights is None else weights[..., start : start + c].unsqueeze(-2)
        if shift is None:
            shift = (e if w is None else e + torch.log2(w)).amax(-1, keepdim=True)
            if not torch.isfinite(shift).all():
                return None
        e = e.sub_(shift).exp2_()
        if w is not None:
            e = e.mul_(w)
        s.append(e.sum(-1))
        n.append(weighted_sum(e, x))
    n, s = torch.stack(n).sum(0), torch.stack(s).sum(0)  # cascade sums over the chunks
    if not (torch.isfinite(s).all() and torch.isfinite(n).all()):
        return None
    return n / s.unsqueeze(-1)


# ==================================================================================================
# The fused training step of softlin.experiment.FullAttention: selected by
# ``experiment.sgd_step(..., fused=True)`` and tested equal, values and gradients, to autograd of
# ``FullAttention.loss`` (tests/test_icl.py).


def fused_sgd_step(models, tokens, zq, targets, lr):
    """One SGD step on the batch MSE of every model in ``models``, with a hand-written backward pass.

    All M models (the starts of every ``FullAttention`` in the list, softmax and linear alike) read the
    tokens together. The rows ``X = [a_1..a_R, c_1..c_R]`` (tilt directions ``a = K^T Q z_q / sqrt(D)``,
    read-outs ``c = V^T o``, divided by L for a linear model) give ``P = X Z^T``, the scores ``s_i`` and
    read-outs ``y_i = c . z_i`` of every token; the softmax rows become ``e_i = exp(s_i - max)`` and
    ``e_i y_i``; then ``P Z`` gives the weighted means ``m = sum_i p_i z_i`` and the one other token sum the
    backward pass needs, ``sum_i p_i y_i z_i``. With ``y_hat = c . m`` and ``g = d loss / d y_hat``:

    - softmax (``p_i = e_i / sum_j e_j``): ``d y_hat / d a = sum_i p_i (y_i - y_hat) z_i``;
    - linear (``p_i = s_i / L``): ``d y_hat / d a = sum_i y_i z_i / L = G c``, ``m = G a``, with the
      token Gram matrix ``G = Z^T Z / L``; from four linear models on, one ``G`` per prompt serves them all
      instead of their rows in ``P``;

    and ``d y_hat / d c = m``; the chain rule through ``a = K^T (Q z_q) / sqrt(D)`` and ``c = V^T o`` gives
    the weight gradients. ``P Z`` is taken as ``Z^T P^T`` over token rows that are contiguous (the layout
    of ``icl.PromptSampler``), which BLAS runs several times faster for D = 6. Inputs are trusted (checked
    by the caller): tokens (B, L, D), zq (B, D), targets (B,). Returns the models' batch MSEs before the
    step (scalar or (S,) tensors), in the order of ``models``.
    """
    B, L, D = tokens.shape
    # softmax rows first
    order = sorted(range(len(models)), key=lambda k: models[k].kind != "softmax")
    group = [models[k] for k in order]
    sizes = [m.Q.reshape(-1, D, D).shape[0] for m in group]
    Q, K, V = (torch.cat([getattr(m, n).reshape(-1, D, D) for m in group]) for n in "QKV")
    o = torch.cat([m.o.reshape(-1, D) for m in group])
    M = Q.shape[0]
    S = sum(n for n, m in zip(sizes, group) if m.kind == "softmax")
    R = S if M - S >= 4 else M  # the models that read the tokens through rows of P
    # (2R, 1): 1/sqrt(D) on a, 1 on c, times 1/L for a linear model
    w = _row_scales(R, S, L, D, tokens)
    U = torch.matmul(K.mT, Q)  # (M, D, D): K^T Q
    a = torch.mm(zq, U.mT.transpose(0, 1).reshape(D, M * D)).view(B, M, D)  # K^T Q z_q, each model
    c = torch.matmul(o.unsqueeze(1), V).squeeze(1)  # (M, D): V^T o
    tokens_t = tokens.mT  # (B, D, L)
    if tokens_t.stride(-1) != 1:
        tokens_t = tokens_t.contiguous()
    # (B, 2R, L): the rows X, scaled, times the tokens
    P = torch.matmul(torch.cat([a[:, :R], c[:R].expand(B, R, D)], 1).mul_(w), tokens_t)
    e = P[:, :S]  # softmax rows: the scores s_i, then e_i = exp(s_i - max_j s_j)
    e.sub_(e.amax(-1, keepdim=True)).exp_()
    P[:, R : R + S].mul_(e)  # e_i y_i
    sums = torch.matmul(tokens_t, P.mT).mT  # (B, 2R, D): the token sums weighted by each row of P
    if S:
        z = e.sum(-1, keepdim=True)
        sums[:, :S].div_(z)
        sums[:, R : R + S].div_(z)
    m, second = sums[:, :R], sums[:, R:]  # (B, R, D): sum_i p_i z_i and sum_i p_i y_i z_i
    if R < M:  # the linear models through the Gram matrix
        G = torch.matmul(tokens_t, tokens_t.mT).div_(L * math.sqrt(D))  # (B, D, D), with 1/sqrt(D)
        m = torch.cat([m, torch.matmul(a[:, R:], G)], 1)
        second = torch.cat([second, torch.matmul(c[R:], G) * math.sqrt(D)], 1)
    pred = (m * c).sum(-1)  # (B, M)
    g = (pred - targets[:, None]) * (2.0 / B)  # d loss / d y_hat
    if S:
        second[:, :S] -= pred[:, :S, None] * m[:, :S]
    da = second * (g / math.sqrt(D)).unsqueeze(-1)  # (B, M, D): d loss / d (K^T Q z_q)
    dU = torch.mm(da.reshape(B, M * D).T, zq).view(M, D, D)
    dc = (g.unsqueeze(-1) * m).sum(0)  # (M, D): d loss / d (V^T o)
    grads = (
        torch.matmul(K, dU),  # dQ
        torch.matmul(Q, dU.mT),  # dK
        o.unsqueeze(-1) * dc.unsqueeze(-2),  # dV
        torch.matmul(V, dc.unsqueeze(-1)).squeeze(-1),  # do
    )
    # Q of each model, K of each, ...
    params = [m_.parameters()[i] for i in range(4) for m_ in group]
    steps = [
        part.view_as(p) for part, p in zip((x for grad in grads for x in grad.split(sizes)), params)
    ]
    torch._foreach_add_(params, steps, alpha=-lr)
    losses = (g * g).mean(0).mul_(B * B / 4).split(sizes)  # the batch MSE of each model
    out = [None] * len(models)
    for k, m_, loss in zip(order, group, losses):
        out[k] = loss.view(m_.Q.shape[:-2])
    return out


_SCALES = {}


def _row_scales(R, S, L, D, like):
    """The scale of each row of ``X`` (cached: a step needs the same few every time)."""
    key = (R, S, L, D, like.dtype, like.device)
    if key not in _SCALES:
        if len(_SCALES) > 64:
            _SCALES.clear()
        w = torch.full((2 * R, 1), 1.0 / L, dtype=like.dtype, device=like.device)
        w[:S] = w[R : R + S] = 1.0
        w[:R] /= math.sqrt(D)
        _SCALES[key] = w
    return _SCALES[key]
