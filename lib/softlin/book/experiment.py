"""The paper's in-context-regression experiment (Section 5's figure): the full attention model, its
starts, data stream, SGD and evaluation.

:class:`FullAttention` is the experiment's single-head layer (``Q, K, V`` and an output vector ``o``, one
model or a stack of starts); :func:`experiment_starts` draws its starts (PyTorch's default, softmax and
linear paired); :func:`sgd_run` and :func:`sgd_step` train several on one data stream, one batch a step;
:func:`held_out_prompts`, :func:`bayes_errors`, :func:`zero_block_size` and :data:`REDUCED_BASIN`
evaluate them. Chapter 5 and ``tools/paper_experiment.py`` share this protocol, once. The full model's
risk is the plain mean squared error of the experiment, noise included (the reduced-model risks of
:mod:`softlin.icl` are *half* mean squared errors, the theory).

Apparatus, not mathematics: this is the training and evaluation machinery with which the book reproduces
the paper's experiment, and it states no result of the paper; the mathematics it trains towards (the
data model, the reduced model (A, b), its risks, class optimum and flow) is :mod:`softlin.icl`, which
does not import this module.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .. import _fast
from .._checks import (
    as_tensor_arg,
    check_choice,
    check_generator,
    check_positive_int,
    check_real,
    check_same_dtype_device,
)
from ..attention import linear_mean, tilted_mean
from ..icl import KINDS, RegressionPrompts, sample_prompts

__all__ = [
    "REDUCED_BASIN",
    "FullAttention",
    "bayes_errors",
    "experiment_starts",
    "held_out_prompts",
    "sgd_run",
    "sgd_step",
    "zero_block_size",
]


@dataclass
class FullAttention:
    """The experiment's single-head layer: one model, or S independent models (starts) stacked.

    ``y_hat = o^T V sum_i p_i z_i`` with ``p_i = softmax_i(s_i)`` (``kind="softmax"``) or ``p_i = s_i / L``
    (``"linear"``) and scores ``s_i = (K z_i)^T (Q z_q) / sqrt(D)``: attention over the prompt tilted
    towards ``a = K^T Q z_q / sqrt(D)`` (the paper's ``U z_q`` with ``U = K^T Q / sqrt(D)``). Only the
    effective matrices ``K^T Q`` (:meth:`key_query`) and ``o^T V`` (:meth:`output_value`) enter; the raw
    weights have symmetries (``K -> M K``, ``Q -> M^-T Q``; ``V -> c V``, ``o -> o / c``).

    Attributes: Q, K, V (D, D) or (S, D, D); o (D,) or (S, D); kind "softmax" or "linear".
    """

    Q: torch.Tensor
    K: torch.Tensor
    V: torch.Tensor
    o: torch.Tensor
    kind: str = "softmax"

    def __post_init__(self):
        check_choice("kind", self.kind, KINDS)
        Q = as_tensor_arg("Q", self.Q)
        if Q.dim() not in (2, 3) or Q.shape[-1] != Q.shape[-2]:
            raise ValueError(f"Q must have shape (D, D) or (S, D, D), got {tuple(Q.shape)}")
        lead, D = tuple(Q.shape[:-2]), Q.shape[-1]
        for name in ("K", "V", "o"):
            x = as_tensor_arg(name, getattr(self, name))
            want = lead + ((D,) if name == "o" else (D, D))
            if tuple(x.shape) != want:
                raise ValueError(f"{name} must have shape {want} (that of Q), got {tuple(x.shape)}")
        check_same_dtype_device({"Q": Q, "K": self.K, "V": self.V, "o": self.o})

    @classmethod
    def initialise(
        cls, d, *, kind="softmax", generator=None, dtype=torch.float32, device=None, starts=None
    ):
        """PyTorch's default ``nn.Linear`` start: entries uniform on ``(-1/sqrt(D), 1/sqrt(D))``.

        Draw order Q, K, V, o (each stored ``(out, in)`` as ``nn.Linear`` does); with ``starts=S``, S
        starts drawn one after the other (the first S' of them are the starts an ``S'`` call draws).
        """
        check_positive_int("d", d)
        check_positive_int("starts", starts, allow_none=True)
        check_generator(generator)
        D = d + 1
        bound = 1.0 / math.sqrt(D)

        def unif(*shape):
            return (
                torch.rand(*shape, generator=generator, dtype=dtype, device=device) * 2 - 1
            ) * bound

        draws = [[unif(D, D), unif(D, D), unif(D, D), unif(D)] for _ in range(starts or 1)]
        params = [torch.stack(p) if starts else p[0] for p in zip(*draws)]
        return cls(*params, kind=kind)

    @property
    def D(self):
        return self.Q.shape[-1]

    def parameters(self):
        """``(Q, K, V, o)``."""
        return self.Q, self.K, self.V, self.o

    def clone(self, kind=None):
        """A deep copy, optionally of the other kind (same weights: a shared start)."""
        return FullAttention(*(p.clone() for p in self.parameters()), kind=kind or self.kind)

    def to(self, dtype=None, device=None):
        """A copy in another dtype and/or on another device."""
        return FullAttention(
            *(p.to(dtype=dtype, device=device) for p in self.parameters()), self.kind
        )

    def key_query(self):
        """The merged key-query matrix ``K^T Q``, (D, D) or (S, D, D)."""
        return self.K.mT @ self.Q

    def output_value(self):
        """The value read-out ``o^T V``, (D,) or (S, D): the row of the paper's ``V`` the prediction reads."""
        return (self.o.unsqueeze(-2) @ self.V).squeeze(-2)

    def predict(self, tokens, queries):
        """Predictions for prompts tokens (B, L, D), queries (B, 1, D): (B,), or (S, B) for S models."""
        tokens, queries = _check_prompts(tokens, queries, self.Q)
        U = (self.key_query() / math.sqrt(self.D)).reshape(-1, self.D, self.D)  # (S, D, D)
        # (B, S, D): the tilt direction U z_q of each model
        a = (queries[:, 0] @ U.mT).transpose(0, 1)
        mean = (tilted_mean if self.kind == "softmax" else linear_mean).kernel(tokens, a)
        pred = (mean * self.output_value().reshape(-1, self.D)).sum(-1).T  # (S, B): o^T V mean
        return pred if self.Q.dim() == 3 else pred[0]

    def loss(self, prompts):
        """The batch mean squared error ``mean_b (y_hat_b - y_b)^2``: a scalar, or (S,) for S models."""
        return ((self.predict(prompts.tokens, prompts.queries) - prompts.targets) ** 2).mean(-1)


# --------------------------------------------------------------------------------------------------
# the experiment's protocol (chapter 5 and tools/paper_experiment.py share it)


def experiment_starts(d, starts, *, generator=None, separate=False, device=None):
    """The experiment's starts: ``[softmax, linear]``, each a :class:`FullAttention` stack of ``starts``.

    PyTorch's default start (:meth:`FullAttention.initialise`, float32). The linear models share the
    softmax models' weights (a paired comparison), or, with ``separate`` (the authors' released script),
    are the next ``starts`` draws of ``generator``.
    """
    soft = FullAttention.initialise(d, generator=generator, device=device, starts=starts)
    lin = (
        FullAttention.initialise(d, generator=generator, device=device, starts=starts)
        if separate
        else soft.clone()
    )
    return [soft, lin.clone(kind="linear")]


def held_out_prompts(Sigma, L, n, *, tau2=1.0, noise_var=0.0, released=False, chunk=512):
    """The experiment's test prompts of length L, in chunks.

    ``n`` prompts of :func:`sample_prompts` from their own generator (seed ``10 000 + L``), yielded in
    chunks of ``chunk``: the same prompts at every call, and the first ``n`` of any longer set.
    """
    check_positive_int("n", n)
    gen = torch.Generator(Sigma.device).manual_seed(10_000 + L)
    for start in range(0, n, chunk):
        yield sample_prompts(
            Sigma,
            L,
            min(chunk, n - start),
            tau2=tau2,
            noise_var=noise_var,
            generator=gen,
            released=released,
        )


def bayes_errors(prompts, *, tau2, noise_var):
    """Per prompt, the Bayes risk given its inputs and the squared error of the Bayes predictor.

    With ``w ~ N(0, tau2 I)`` and label noise of variance ``s2 = noise_var`` the posterior of ``w`` given
    the prompt is Gaussian with precision ``X^T X / s2 + I / tau2``: its mean is ridge regression with
    ``lambda = s2 / tau2``, and the expected error of its prediction is
    ``s2 + x_q^T (X^T X / s2 + I / tau2)^-1 x_q`` (task and noise integrated exactly).

    prompts : :class:`RegressionPrompts`. Returns (risk (B,), squared error of ridge (B,)), float64.
    """
    x, y, xq, t = (v.double() for v in (prompts.x, prompts.y, prompts.x_query, prompts.targets))
    eye = torch.eye(x.shape[-1], dtype=x.dtype, device=x.device)
    precision = x.mT @ x / noise_var + eye / tau2  # (B, d, d), of w given the prompt
    risk = noise_var + (xq * torch.linalg.solve(precision, xq.unsqueeze(-1)).squeeze(-1)).sum(-1)
    beta = torch.linalg.solve(precision, (x.mT @ y.unsqueeze(-1)).squeeze(-1) / noise_var)
    return risk, ((xq * beta).sum(-1) - t) ** 2


def sgd_run(models, sampler, stream, lr, steps, *, done=0):
    """The experiment's training loop, one step at a time.

    Yields ``(step, losses)`` after each :func:`sgd_step` of all ``models`` on one fresh batch of
    ``sampler`` drawn from ``stream`` (one data stream for all), for steps ``done + 1`` to ``steps``.
    """
    for step in range(done + 1, steps + 1):
        yield step, sgd_step(models, sampler.sample(stream), lr)


#: A trained model is in the reduced basin when its :func:`zero_block_size` is below this. In the
#: paper-scale runs the sizes are bimodal: at most 0.01 (the reduced structure) or at least 1.8 (the
#: labels in the scores); 0.1 sits more than a decade from both.
REDUCED_BASIN = 0.1


def zero_block_size(U, c):
    """The relative size of the blocks that the reduced model of Section 5.2 sets to zero.

    ``||U_yx|| / ||U_xx|| + ||c_x|| / |c_y|``, with ``U_xx = U[:d, :d]``, the label row ``U_yx = U[d, :d]``
    (the labels in the scores) and ``c = (c_x, c_y)``. Zero exactly for the reduced model; invariant
    under the rescalings ``U -> sU``, ``c -> tc`` (so ``K^T Q`` may be passed for ``U``).

    U : Tensor (..., D, D), the effective key-query matrix (:meth:`FullAttention.key_query`).
    c : Tensor (..., D), the effective read-out (:meth:`FullAttention.output_value`).
    Returns a Tensor (...): compare it with :data:`REDUCED_BASIN`.
    """
    U, c = as_tensor_arg("U", U), as_tensor_arg("c", c)
    if U.dim() < 2 or U.shape[-1] != U.shape[-2] or tuple(c.shape) != tuple(U.shape[:-1]):
        raise ValueError(
            f"U must have shape (..., D, D) and c (..., D), got {tuple(U.shape)} and {tuple(c.shape)}"
        )
    d = U.shape[-1] - 1
    label_row = U[..., d, :d].norm(dim=-1) / U[..., :d, :d].norm(dim=(-2, -1))
    return label_row + c[..., :d].norm(dim=-1) / c[..., d].abs()


def _check_prompts(tokens, queries, ref):
    """tokens (B, L, D) with L >= 1, queries (B, 1, D), in the dtype and device of ``ref``; no value pass
    (a batch of training data is finite by construction; a non-finite loss shows the rest)."""
    for name, x in (("tokens", tokens), ("queries", queries)):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    D = ref.shape[-1]
    if (
        tokens.dim() != 3
        or tokens.shape[1] == 0
        or tokens.shape[2] != D
        or tuple(queries.shape) != (tokens.shape[0], 1, D)
    ):
        raise ValueError(
            f"tokens must have shape (B, L, {D}) with L >= 1 and queries (B, 1, {D}), got "
            f"{tuple(tokens.shape)} and {tuple(queries.shape)}"
        )
    check_same_dtype_device({"tokens": tokens, "queries": queries, "the model's Q": ref})
    return tokens, queries


def sgd_step(models, prompts, lr, *, fused=True):
    """One plain SGD step on the batch MSE for each model, in place; all models read the same batch.

    Parameters
    ----------
    models : sequence of :class:`FullAttention` (each one model or a stack of starts, any kinds).
    prompts : :class:`RegressionPrompts`; lr : float > 0.
    fused : use the hand-written forward and backward pass of ``softlin._fast``, which reads the tokens
        twice for all models together (their scores and weighted sums as two batched products); False
        differentiates :meth:`FullAttention.loss` with autograd (the same numbers, to rounding).

    Returns
    -------
    list of the models' batch MSEs before the step (Tensors, scalar or (S,)), on the models' device.
    """
    if (
        isinstance(models, FullAttention)
        or not models
        or not all(isinstance(m, FullAttention) for m in models)
    ):
        raise TypeError("models must be a non-empty sequence of FullAttention")
    if not isinstance(prompts, RegressionPrompts):
        raise TypeError(f"prompts must be RegressionPrompts, got {type(prompts).__name__}")
    lr = check_real("lr", lr, positive=True)
    for m in models:
        _check_prompts(prompts.tokens, prompts.queries, m.Q)
    if tuple(prompts.targets.shape) != (prompts.tokens.shape[0],):
        raise ValueError(
            f"targets must have shape ({prompts.tokens.shape[0]},), got "
            f"{tuple(prompts.targets.shape)}"
        )
    if fused:
        return _fast.fused_sgd_step(
            models, prompts.tokens, prompts.queries[:, 0], prompts.targets, lr
        )
    losses = []
    for m in models:
        params = [p.detach().requires_grad_(True) for p in m.parameters()]
        loss = FullAttention(*params, kind=m.kind).loss(prompts)
        # the models are independent: sum their losses
        grads = torch.autograd.grad(loss.sum(), params)
        with torch.no_grad():
            for p, g in zip(m.parameters(), grads):
                p.sub_(g, alpha=lr)
        losses.append(loss.detach())
    return losses
