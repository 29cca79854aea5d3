"""Chapter 1's library code: outputs of many prompts across lengths, and its plotting functions."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import softlin as sl  # noqa: E402
from softlin.prompts import outputs_across_lengths, plot_output_funnel, plot_tilted_prompt  # noqa: E402

F64 = torch.float64


def _setup():
    mu = sl.GaussianMeasure(torch.zeros(2, dtype=F64), torch.tensor([[1.0, 0.5], [0.5, 1.0]], dtype=F64))
    U, V = torch.tensor([[0.8, 0.0], [0.3, 0.5]], dtype=F64), torch.eye(2, dtype=F64)
    z = torch.tensor([[1.0, -0.5]], dtype=F64)
    return mu, U, V, z


def test_outputs_shapes_and_reproducibility():
    mu, U, V, z = _setup()
    runs = [outputs_across_lengths(mu, z, U, V, [5, 50], 30, generator=torch.Generator().manual_seed(0),
                                   max_tokens_per_batch=70) for _ in range(2)]
    assert runs[0][5].shape == (30, 1, 2) and runs[0][50].shape == (30, 1, 2)
    torch.testing.assert_close(runs[0][50], runs[1][50], rtol=0, atol=0)  # same seed, same numbers


def test_outputs_concentrate_at_rate_one_over_sqrt_L():
    mu, U, V, z = _setup()
    limit = sl.gaussian_attention_limit(z, U, V, mu.mean, mu.cov)[0]
    out = outputs_across_lengths(mu, z, U, V, [100, 10_000], 400, generator=torch.Generator().manual_seed(1))
    rmse = {L: (out[L][:, 0] - limit).pow(2).sum(-1).mean().sqrt().item() for L in out}
    ratio = rmse[100] / rmse[10_000]
    # L^(-1/2) predicts a ratio of 10; each RMSE from 400 prompts is within ~10% (2 s.e.), bias < 15% at L=100.
    assert 7.0 < ratio < 13.0, ratio


def test_linear_kind_uses_linear_attention():
    mu, U, V, z = _setup()
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    out = outputs_across_lengths(mu, z, U, V, [20], 4, generator=g1, kind="linear")[20]
    tokens = mu.sample(80, generator=g2).reshape(4, 20, 2)
    torch.testing.assert_close(out, sl.linear_attention(tokens, z.expand(4, 1, 2), U, V))


@pytest.mark.parametrize("kwargs, needle", [
    (dict(lengths=[]), "lengths must hold at least one"),
    (dict(lengths=[0]), "each prompt length in lengths must be a positive integer"),
    (dict(n_prompts=0), "n_prompts must be a positive integer"),
    (dict(kind="relu"), "kind must be 'softmax' or 'linear'"),
])
def test_outputs_bad_input(kwargs, needle):
    mu, U, V, z = _setup()
    args = dict(lengths=[5], n_prompts=2, kind="softmax") | kwargs
    with pytest.raises(ValueError, match=needle):
        outputs_across_lengths(mu, z, U, V, args["lengths"], args["n_prompts"], kind=args["kind"])


def test_plot_tilted_prompt_returns_the_softmax_output_and_draws():
    fig, ax = plt.subplots()
    out = plot_tilted_prompt(ax, L=40, tilt=1.5, seed=2)
    assert out.shape == (2,) and torch.isfinite(out).all()
    assert "L = 40" in ax.get_title() and len(ax.lines) == 3
    # With zero tilt the softmax output is the plain mean of the prompt.
    out0 = plot_tilted_prompt(ax, L=40, tilt=0.0, seed=2)
    tokens = sl.GaussianMeasure(torch.zeros(2, dtype=F64), torch.tensor([[1.0, 0.5], [0.5, 1.0]], dtype=F64)).sample(
        40, generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(out0, tokens.mean(0))
    with pytest.raises(ValueError, match="tilt must be a non-negative"):
        plot_tilted_prompt(ax, tilt=-1.0)
    plt.close(fig)


def test_plot_output_funnel_draws_limit_line():
    mu, U, V, z = _setup()
    out = outputs_across_lengths(mu, z, U, V, [10, 100], 5, generator=torch.Generator().manual_seed(0))
    fig, ax = plt.subplots()
    plot_output_funnel(ax, out, 0.5)
    assert ax.get_xscale() == "log"
    assert any(math.isclose(line.get_ydata()[0], 0.5) for line in ax.lines)
    plt.close(fig)
