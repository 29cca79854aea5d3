"""Many prompts drawn from one token law: finite-prompt outputs across prompt lengths, and the pictures of
chapter 1 (a prompt as a measure, softmax as its exponential tilt).

A prompt of length L drawn i.i.d. from ``mu`` is the empirical measure ``mu_hat_L``; softmax attention is
``T[mu_hat_L](z)``, a random quantity whose spread shrinks as L grows (law of large numbers applied to the
numerator and the denominator of ``T``).
"""

from __future__ import annotations

import math

import torch

from ._checks import as_tensor_arg, check_generator, check_positive_int
from .attention import linear_attention, softmax_attention, softmax_weights
from .measures import GaussianMeasure, TokenMeasure, gaussian_attention_limit
from .plotting import OKABE_ITO

__all__ = ["outputs_across_lengths", "plot_tilted_prompt", "plot_output_funnel"]


def outputs_across_lengths(measure, queries, U, V, lengths, n_prompts, *, generator=None, kind="softmax",
                           max_tokens_per_batch=2_000_000):
    """Attention outputs of ``n_prompts`` independent prompts of each length in ``lengths``.

    Parameters
    ----------
    measure : TokenMeasure
        Token law ``mu``; prompts are ``L`` i.i.d. draws from it.
    queries : Tensor, shape (Q, D)
        The same queries are used for every prompt.
    U : Tensor (D, D); V : Tensor (D_out, D)
    lengths : sequence of positive ints
    n_prompts : int
        Independent prompts per length.
    generator : torch.Generator, optional
    kind : "softmax" or "linear"
    max_tokens_per_batch : int
        Prompts are processed in batches holding at most this many tokens (memory bound).

    Returns
    -------
    dict mapping each L to a Tensor of shape (n_prompts, Q, D_out).
    """
    if not isinstance(measure, TokenMeasure):
        raise TypeError(f"measure must be a softlin TokenMeasure, got {type(measure).__name__}")
    queries = as_tensor_arg("queries", queries, min_dim=2)
    if queries.dim() != 2:
        raise ValueError(f"queries must have shape (Q, D), got {tuple(queries.shape)}")
    lengths = list(lengths)
    if not lengths:
        raise ValueError("lengths must hold at least one prompt length, got an empty sequence")
    for L in lengths:
        check_positive_int("each prompt length in lengths", L)
    check_positive_int("n_prompts", n_prompts)
    check_positive_int("max_tokens_per_batch", max_tokens_per_batch)
    check_generator(generator)
    if kind not in ("softmax", "linear"):
        raise ValueError(f"kind must be 'softmax' or 'linear', got {kind!r}")
    attend = softmax_attention if kind == "softmax" else linear_attention
    out = {}
    for L in lengths:
        per_batch = max(1, max_tokens_per_batch // L)
        chunks = []
        for start in range(0, n_prompts, per_batch):
            n = min(per_batch, n_prompts - start)
            tokens = measure.sample(n * L, generator=generator).reshape(n, L, measure.dim)
            chunks.append(attend(tokens, queries.expand(n, *queries.shape), U, V))
        out[L] = torch.cat(chunks)
    return out


def plot_tilted_prompt(ax, L=60, tilt=1.0, seed=0, rho=0.5):
    """Draw one prompt of ``L`` tokens from N(0, [[1, rho], [rho, 1]]) in the plane, each token's marker area
    proportional to its softmax weight for the tilt direction ``a = U z = tilt * (cos 30°, sin 30°)``.

    Marks the plain mean of the prompt (uniform weights), its tilted mean (the softmax output with V = I)
    and the infinite-prompt tilted mean ``Gamma a`` (Lemma 2.1). Returns the softmax output, shape (2,).
    """
    check_positive_int("L", L)
    if not (isinstance(tilt, (int, float)) and math.isfinite(tilt) and tilt >= 0):
        raise ValueError(f"tilt must be a non-negative finite number, got {tilt!r}")
    g = torch.Generator().manual_seed(int(seed))
    cov = torch.tensor([[1.0, rho], [rho, 1.0]], dtype=torch.float64)
    mu = GaussianMeasure(torch.zeros(2, dtype=torch.float64), cov)
    tokens = mu.sample(L, generator=g)  # (L, 2)
    direction = torch.tensor([[math.cos(math.pi / 6), math.sin(math.pi / 6)]], dtype=torch.float64)
    U, V = tilt * torch.eye(2, dtype=torch.float64), torch.eye(2, dtype=torch.float64)
    p = softmax_weights(tokens, direction, U)[0]  # (L,)
    out = softmax_attention(tokens, direction, U, V)[0]
    limit = gaussian_attention_limit(direction, U, V, mu.mean, mu.cov)[0]
    ax.scatter(tokens[:, 0], tokens[:, 1], s=4 + 400 * p.numpy(), color=OKABE_ITO[5], alpha=0.6,
               edgecolor=OKABE_ITO[0], linewidth=0.5, marker="o", label="tokens (area ∝ softmax weight)")
    mean = tokens.mean(0)
    ax.plot(mean[0], mean[1], marker="X", markersize=10, color="black", linestyle="none", label="plain mean")
    ax.plot(out[0], out[1], marker="*", markersize=15, color=OKABE_ITO[1], linestyle="none",
            markeredgecolor="black", label="softmax output (tilted mean)")
    ax.plot(limit[0], limit[1], marker="D", markersize=8, color=OKABE_ITO[2], linestyle="none",
            markeredgecolor="black", label=r"limit $\Gamma U z$")
    ax.annotate("", xy=(1.6 * direction[0, 0], 1.6 * direction[0, 1]), xytext=(0, 0),
                arrowprops=dict(arrowstyle="->", color="0.3"))
    ax.set(xlim=(-3.5, 3.5), ylim=(-3.5, 3.5), aspect="equal", xlabel="$z_1$", ylabel="$z_2$",
           title=f"L = {L},  tilt |Uz| = {tilt:g}")
    return out


def plot_output_funnel(ax, outputs, limit, *, coordinate=0, label="softmax", style=None, show_points=True):
    """Plot the spread of finite-prompt outputs against L (log axis) around the limit value.

    ``outputs``: dict L -> Tensor (n_prompts, Q, D_out) from :func:`outputs_across_lengths` (query 0 is used);
    ``limit``: float, the infinite-prompt value of that coordinate. Draws each prompt's output as a faint
    point, the mean ± 2 standard deviations across prompts as an error bar, and the limit as a line.
    """
    style = dict(style or {})
    Ls = sorted(outputs)
    vals = [outputs[L][:, 0, coordinate] for L in Ls]
    if show_points:
        for L, v in zip(Ls, vals):
            jitter = torch.exp(0.06 * torch.linspace(-1, 1, len(v), dtype=torch.float64))
            ax.plot(L * jitter, v, linestyle="none", marker=style.get("marker", "o"), markersize=2, alpha=0.25,
                    color=style.get("color", OKABE_ITO[0]))
    means = torch.stack([v.mean() for v in vals])
    sds = torch.stack([v.std() for v in vals])
    ax.errorbar(Ls, means, yerr=2 * sds, capsize=3, label=f"{label}: mean ± 2 sd over prompts", **style)
    ax.axhline(limit, color="black", linestyle=":", marker="", label="infinite-prompt limit")
    ax.set_xscale("log")
    ax.set(xlabel="prompt length L", ylabel="attention output (first coordinate)")
