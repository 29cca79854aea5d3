"""The paper's in-context-regression experiment (Section 5's figure), written once.

:class:`Protocol` holds every setting of the experiment (as nanoGPT's ``GPTConfig`` holds a model's):
:data:`INTENDED` is the data model of the theory (prompt and query inputs ``N(0, Sigma)``, each start
shared by its softmax and its linear model), :data:`RELEASED` the authors' released script (their data
generator, separate starts). :class:`FullAttention` is the experiment's single-head layer (``Q, K, V``
and an output vector ``o``); :func:`sgd_run` and :func:`sgd_step` train several models on one data
stream; :func:`evaluate` measures them on the protocol's test prompts with the Bayes baseline, and
returns an :class:`Evaluation`; :func:`load_results` reads the committed paper-scale results
(``book/data/paper_experiment.json``, written by ``tools/paper_experiment.py``) into :class:`LengthRun`
records. The errors here are plain mean squared errors, target noise included (the experiment's loss);
the reduced-model risks of :mod:`softlin.icl` are *half* mean squared errors (the theory).

What the theory predicts for this experiment at large ``L`` (lesson 6) is
:func:`softlin.icl.large_prompt_constants` at the protocol's settings: each model's excess over the Bayes
risk falls as ``C / L``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import numpy as np
import torch

from . import _data, _fast
from . import _experiment_args as _args
from ._checks import (
    as_tensor_arg,
    check_choice,
    check_finite,
    check_real,
    check_same_dtype_device,
    validated_by,
)
from .attention import linear_mean, tilted_mean
from .icl import (
    KINDS,
    PromptSampler,
    kms_covariance,
    sample_prompts,
)

__all__ = [
    "INTENDED",
    "PAPER_LENGTHS",
    "REDUCED_BASIN",
    "RELEASED",
    "ByKind",
    "CurvaturePoint",
    "Evaluation",
    "Floor",
    "FullAttention",
    "LengthRun",
    "Protocol",
    "References",
    "bayes_errors",
    "block_ratios",
    "evaluate",
    "experiment_starts",
    "held_out_prompts",
    "load_references",
    "load_results",
    "sgd_run",
    "sgd_step",
    "train",
    "zero_block_size",
]

#: The 19 prompt lengths of the authors' script: 10, 20, ..., 90, 100, 200, ..., 1000.
PAPER_LENGTHS = tuple(range(10, 100, 10)) + tuple(range(100, 1001, 100))


@dataclasses.dataclass(frozen=True)
class Protocol:
    """Every setting of the paper's Section 5 experiment, once.

    The data: ``d``-dimensional inputs with the KMS covariance ``Sigma_ij = rho^|i-j|``, tasks
    ``w ~ N(0, tau2 I)``, label noise of variance ``noise_var`` on every label (the target's too);
    ``released`` draws as the authors' generator does (prompt inputs ``N(0, (CC)(CC)^T)``, query
    ``N(0, I)``: :class:`softlin.icl.PromptSampler`). The training: ``starts`` random starts of PyTorch's
    default initialisation, a softmax and a linear model each (the same weights, or ``separate_starts``),
    plain SGD on the batch MSE at ``lr`` with ``batch`` fresh prompts a step, ``steps`` steps, all models
    on one data stream. Seeds: the starts from ``seed``, the stream from ``seed + 1``, the test prompts
    of length L from ``10 000 + L`` (:meth:`test_seed`); ``n_test`` of them.
    """

    d: int = 5
    rho: float = 0.5
    tau2: float = 0.2
    noise_var: float = 0.1
    lr: float = 1e-3
    batch: int = 128
    steps: int = 300_000
    starts: int = 8
    lengths: tuple = PAPER_LENGTHS
    n_test: int = 8_192
    seed: int = 0
    released: bool = False
    separate_starts: bool = False

    def __post_init__(self):
        _args.protocol_fields(self)

    @property
    def name(self):
        """``"released"`` for the authors' generator, else ``"intended"``."""
        return "released" if self.released else "intended"

    @classmethod
    @validated_by(_args.from_settings)
    def from_settings(cls, settings):
        """The protocol a results file records (its ``settings``; ``different_starts`` is
        ``separate_starts``; entries that are not settings, such as ``record_every``, are ignored)."""
        fields = {f.name for f in dataclasses.fields(cls)} - {"lengths"}
        given = {k: v for k, v in settings.items() if k in fields}
        return cls(**given, separate_starts=settings.get("different_starts", False))

    def replace(self, **changes):
        """A copy with some settings changed (``INTENDED.replace(steps=6000, lr=0.05)``)."""
        return dataclasses.replace(self, **changes)

    def covariance(self, *, dtype=torch.float64, device=None):
        """``Sigma`` (d, d), the inputs' KMS covariance."""
        return kms_covariance(self.d, self.rho, dtype=dtype, device=device)

    def _data(self):  # the keyword arguments of the prompt samplers
        return {"tau2": self.tau2, "noise_var": self.noise_var, "released": self.released}

    @validated_by(_args.sampler)
    def sampler(self, L, *, batch=None, device=None):
        """The training data of length L: a :class:`softlin.icl.PromptSampler` (float32)."""
        Sigma = self.covariance(dtype=torch.float32, device=device)
        return PromptSampler(Sigma, L, batch or self.batch, **self._data())

    @staticmethod
    def test_seed(L):
        """The seed of the test prompts of length L: ``10 000 + L``."""
        return 10_000 + L

    @validated_by(_args.test_prompts)
    def test_prompts(self, L, n=None, *, device=None, chunk=512):
        """The first ``n`` (default ``n_test``) test prompts of length L (:func:`held_out_prompts`)."""
        Sigma = self.covariance(dtype=torch.float32, device=device)
        seed = self.test_seed(L)
        return held_out_prompts(Sigma, L, n or self.n_test, chunk=chunk, seed=seed, **self._data())

    def initial_models(self, *, device=None):
        """The ``starts`` starts, ``[softmax, linear]`` (:func:`experiment_starts`, seed ``seed``)."""
        gen = torch.Generator(device or "cpu").manual_seed(self.seed)
        return experiment_starts(
            self.d, self.starts, generator=gen, separate=self.separate_starts, device=device
        )

    def stream(self, *, device=None):
        """The data stream's generator (seed ``seed + 1``)."""
        return torch.Generator(device or "cpu").manual_seed(self.seed + 1)


#: The data model of the theory, the starts shared by the two models.
INTENDED = Protocol()
#: The authors' released script: their data generator, separate starts.
RELEASED = Protocol(released=True, separate_starts=True)


# --------------------------------------------------------------------------------------------------
# the model


@dataclasses.dataclass
class FullAttention:
    """The experiment's single-head layer: one model, or S independent models (starts) stacked.

    ``y_hat = o^T V sum_i p_i z_i`` with ``p_i = softmax_i(s_i)`` (``kind="softmax"``) or ``p_i = s_i / L``
    (``"linear"``) and scores ``s_i = (K z_i)^T (Q z_q) / sqrt(D)``: attention over the prompt tilted
    towards ``a = U z_q`` with the paper's ``U = K^T Q / sqrt(D)`` (:meth:`effective_U`), read out by
    ``v = V^T o`` (:meth:`readout`). Only these effective parameters enter; the raw weights have
    symmetries (``K -> M K``, ``Q -> M^-T Q``; ``V -> c V``, ``o -> o / c``).

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
    @validated_by(_args.initialise)
    def initialise(
        cls, d, *, kind="softmax", generator=None, dtype=torch.float32, device=None, starts=None
    ):
        """PyTorch's default ``nn.Linear`` start: entries uniform on ``(-1/sqrt(D), 1/sqrt(D))``.

        Draw order Q, K, V, o (each stored ``(out, in)`` as ``nn.Linear`` does); with ``starts=S``, S
        starts drawn one after the other (the first S' of them are the starts an ``S'`` call draws).
        """
        D = d + 1
        bound = 1.0 / math.sqrt(D)

        def unif(*shape):
            return (
                torch.rand(*shape, generator=generator, dtype=dtype, device=device) * 2 - 1
            ) * bound

        draws = [[unif(D, D), unif(D, D), unif(D, D), unif(D)] for _ in range(starts or 1)]
        params = [torch.stack(p) if starts else p[0] for p in zip(*draws)]
        return cls(*params, kind=kind)

    @classmethod
    @validated_by(_args.from_effective)
    def from_effective(cls, key_query, readout, *, kind="softmax"):
        """The model with ``K^T Q = key_query`` (..., D, D) and ``o^T V = readout`` (..., D): ``K = V = I``.
        (A trained model is determined, for its predictions, by these two.)"""
        KQ, v = as_tensor_arg("key_query", key_query), as_tensor_arg("readout", readout)
        eye = torch.eye(KQ.shape[-1], dtype=KQ.dtype, device=KQ.device).expand_as(KQ).clone()
        return cls(KQ, eye, eye.clone(), v, kind=kind)

    @property
    def D(self):
        return self.Q.shape[-1]

    def parameters(self):
        """``(Q, K, V, o)``."""
        return self.Q, self.K, self.V, self.o

    def clone(self, kind=None):
        """A deep copy, optionally of the other kind (same weights: a shared start)."""
        return FullAttention(*(p.clone() for p in self.parameters()), kind=kind or self.kind)

    def key_query(self):
        """The merged key-query matrix ``K^T Q``, (D, D) or (S, D, D) (the recorded one)."""
        return self.K.mT @ self.Q

    def effective_U(self):
        """The paper's ``U = K^T Q / sqrt(D)``, (D, D) or (S, D, D): the score of ``z_i`` is ``z_i^T U z_q``."""
        return self.key_query() / math.sqrt(self.D)

    def readout(self):
        """``v = V^T o``, (D,) or (S, D): the prediction is ``v^T sum_i p_i z_i``."""
        return (self.o.unsqueeze(-2) @ self.V).squeeze(-2)

    def predict(self, tokens, queries):
        """Predictions for prompts tokens (B, L, D), queries (B, 1, D): (B,), or (S, B) for S models."""
        tokens, queries = _check_prompts(tokens, queries, self.Q, finite=True)  # validation
        U = self.effective_U().reshape(-1, self.D, self.D)  # (S, D, D)
        a = (queries[:, 0] @ U.mT).transpose(0, 1)  # (B, S, D): the tilt U z_q of each model
        mean = (tilted_mean if self.kind == "softmax" else linear_mean).kernel(tokens, a)
        pred = (mean * self.readout().reshape(-1, self.D)).sum(-1).T  # (S, B): v^T mean
        return pred if self.Q.dim() == 3 else pred[0]

    def loss(self, prompts):
        """The batch mean squared error ``mean_b (y_hat_b - y_b)^2``: a scalar, or (S,) for S models."""
        return ((self.predict(prompts.tokens, prompts.queries) - prompts.targets) ** 2).mean(-1)


_args.CLASSES.update(Protocol=Protocol, FullAttention=FullAttention)


@validated_by(_args.experiment_starts)
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


def _check_prompts(tokens, queries, ref, *, finite=False):
    """tokens (B, L, D) with L >= 1, queries (B, 1, D), in the dtype and device of ``ref``; a value pass
    only when ``finite`` (a batch of training data is finite by construction; a non-finite loss shows
    the rest)."""
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
    if finite:
        check_finite("tokens", tokens)
        check_finite("queries", queries)
    return tokens, queries


# --------------------------------------------------------------------------------------------------
# training


@validated_by(_args.sgd_run)
def sgd_run(models, sampler, stream, lr, steps, *, done=0):
    """The experiment's training loop, one step at a time.

    Yields ``(step, losses)`` after each :func:`sgd_step` of all ``models`` on one fresh batch of
    ``sampler`` drawn from ``stream`` (one data stream for all), for steps ``done + 1`` to ``steps``.
    """
    for step in range(done + 1, steps + 1):
        yield step, sgd_step(models, sampler.sample(stream), lr)


@validated_by(_args.train)
def train(protocol, L, *, device=None, progress=False):
    """Train the protocol's starts at prompt length L from scratch: ``protocol.steps`` steps of
    :func:`sgd_run` on one data stream (:meth:`Protocol.initial_models`, :meth:`Protocol.sampler`,
    :meth:`Protocol.stream`), with a progress bar (``tqdm.auto``) when ``progress``. Returns the trained
    models ``[softmax, linear]`` (``tools/paper_experiment.py`` runs the same steps with checkpoints)."""
    from tqdm.auto import tqdm

    models = protocol.initial_models(device=device)
    sampler, stream = protocol.sampler(L, device=device), protocol.stream(device=device)
    steps = sgd_run(models, sampler, stream, protocol.lr, protocol.steps)
    for _ in tqdm(steps, total=protocol.steps, disable=not progress, desc=f"L={L}", mininterval=2):
        pass
    return models


@validated_by(_args.sgd_step)
def sgd_step(models, prompts, lr, *, fused=True):
    """One plain SGD step on the batch MSE for each model, in place; all models read the same batch.

    Parameters
    ----------
    models : sequence of :class:`FullAttention` (each one model or a stack of starts, any kinds).
    prompts : :class:`softlin.icl.RegressionPrompts`; lr : float > 0.
    fused : use the hand-written forward and backward pass of ``softlin._fast``, which reads the tokens
        twice for all models together (their scores and weighted sums as two batched products); False
        differentiates :meth:`FullAttention.loss` with autograd (the same numbers, to rounding).

    Returns
    -------
    list of the models' batch MSEs before the step (Tensors, scalar or (S,)), on the models' device.
    """
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


# --------------------------------------------------------------------------------------------------
# evaluation


@validated_by(_args.held_out_prompts)
def held_out_prompts(Sigma, L, n, *, tau2=1.0, noise_var=0.0, released=False, chunk=512, seed=None):
    """The experiment's test prompts of length L, in chunks.

    ``n`` prompts of :func:`softlin.icl.sample_prompts` from their own generator (seed ``seed``, by
    default :meth:`Protocol.test_seed`, ``10 000 + L``), yielded in chunks of ``chunk``: the same prompts
    at every call, and the first ``n`` of any longer set.
    """
    gen = torch.Generator(Sigma.device).manual_seed(Protocol.test_seed(L) if seed is None else seed)
    data = {"tau2": tau2, "noise_var": noise_var, "released": released}
    for start in range(0, n, chunk):
        yield sample_prompts(Sigma, L, min(chunk, n - start), generator=gen, **data)


@validated_by(_args.bayes_errors)
def bayes_errors(prompts, *, tau2, noise_var):
    """Per prompt, the Bayes risk given its inputs and the squared error of the Bayes predictor.

    With ``w ~ N(0, tau2 I)`` and label noise of variance ``s2 = noise_var`` the posterior of ``w`` given
    the prompt is Gaussian with precision ``X^T X / s2 + I / tau2``: its mean is ridge regression with
    ``lambda = s2 / tau2``, and the expected error of its prediction is
    ``s2 + x_q^T (X^T X / s2 + I / tau2)^-1 x_q`` (task and noise integrated exactly).

    prompts : :class:`softlin.icl.RegressionPrompts`. Returns (risk (B,), squared error of ridge (B,)),
    float64.
    """
    x, y, xq, t = (v.double() for v in (prompts.x, prompts.y, prompts.x_query, prompts.targets))
    eye = torch.eye(x.shape[-1], dtype=x.dtype, device=x.device)
    precision = x.mT @ x / noise_var + eye / tau2  # (B, d, d), of w given the prompt
    risk = noise_var + (xq * torch.linalg.solve(precision, xq.unsqueeze(-1)).squeeze(-1)).sum(-1)
    beta = torch.linalg.solve(precision, (x.mT @ y.unsqueeze(-1)).squeeze(-1) / noise_var)
    return risk, ((xq * beta).sum(-1) - t) ** 2


class Evaluation(NamedTuple):
    """Test errors of the experiment's models at one prompt length, per start and test prompt.

    softmax, linear : Tensor (S, n), float64 on the CPU: each start's squared error on each test prompt.
    bayes : Tensor (n,) or None: the Bayes risk given each prompt's inputs.
    ridge : Tensor (n,) or None: the squared error of ridge with the Bayes lambda (the Bayes
    predictor), whose mean is the Bayes risk: the control variate of :meth:`excess`.
    """

    softmax: torch.Tensor
    linear: torch.Tensor
    bayes: torch.Tensor | None = None
    ridge: torch.Tensor | None = None

    def errors(self, kind):
        """The (S, n) squared errors of ``kind``."""
        check_choice("kind", kind, KINDS)
        return getattr(self, kind)

    def excess(self, kind):
        """(S, n): each start's error minus the Bayes predictor's on the same prompt; its mean is the
        excess over the Bayes risk."""
        if self.ridge is None:
            raise ValueError("this Evaluation has no baselines (evaluate(..., baselines=True))")
        return self.errors(kind) - self.ridge


@validated_by(_args.evaluate)
def evaluate(models, protocol, L, *, n=None, baselines=True, device=None):
    """Test errors of the models ``[softmax, linear]`` at length L on the protocol's test prompts.

    models : a list of two :class:`FullAttention` (kinds softmax and linear, S starts each).
    protocol : :class:`Protocol`; n : test prompts (default ``protocol.n_test``); baselines : also the
    Bayes risk and ridge errors. Returns an :class:`Evaluation`.
    """
    errs = {m.kind: [] for m in models}
    bayes, ridge = [], []
    with torch.no_grad():
        for p in protocol.test_prompts(L, n, device=device):
            for m in models:
                errs[m.kind].append(((m.predict(p.tokens, p.queries) - p.targets) ** 2).double())
            if baselines:
                b, r = bayes_errors(p, tau2=protocol.tau2, noise_var=protocol.noise_var)
                bayes.append(b)
                ridge.append(r)
    errs = {k: torch.atleast_2d(torch.cat(v, -1).cpu()) for k, v in errs.items()}  # (S, n)
    if not baselines:
        return Evaluation(errs["softmax"], errs["linear"])
    return Evaluation(
        errs["softmax"], errs["linear"], torch.cat(bayes).cpu(), torch.cat(ridge).cpu()
    )


#: A trained model is in the reduced basin when its :func:`zero_block_size` is below this. In the
#: committed paper-scale runs the reduced basin's sizes are at most 0.01; the read-out group's are printed
#: by lesson 6 from the file (``LengthRun.block_ratios``).
REDUCED_BASIN = 0.1


def block_ratios(U, v):
    """The relative sizes of the two blocks that the reduced model of Section 5.2 sets to zero.

    ``(||U_yx|| / ||U_xx||, ||v_x|| / |v_y|)``: the label row ``U_yx = U[d, :d]`` (the labels in the
    scores) against ``U_xx = U[:d, :d]``, and the input read-out ``v_x = v[:d]`` against ``v_y = v[d]``.
    Both are zero for the reduced model and invariant under the rescalings ``U -> sU``, ``v -> tv`` (so
    ``K^T Q`` may be passed for ``U``). U (..., D, D), v (..., D); returns two Tensors (...).
    """
    U, v = as_tensor_arg("U", U), as_tensor_arg("v", v)
    if U.dim() < 2 or U.shape[-1] != U.shape[-2] or tuple(v.shape) != tuple(U.shape[:-1]):
        raise ValueError(
            f"U must have shape (..., D, D) and v (..., D), got {tuple(U.shape)} and {tuple(v.shape)}"
        )
    d = U.shape[-1] - 1
    label_row = U[..., d, :d].norm(dim=-1) / U[..., :d, :d].norm(dim=(-2, -1))
    return label_row, v[..., :d].norm(dim=-1) / v[..., d].abs()


def zero_block_size(U, v):
    """The sum of the two :func:`block_ratios`: compare it with :data:`REDUCED_BASIN`."""
    label_row, readout = block_ratios(U, v)
    return label_row + readout


# --------------------------------------------------------------------------------------------------
# the committed paper-scale results


class ByKind(NamedTuple):
    """One value per model: ``.softmax`` and ``.linear``."""

    softmax: object
    linear: object


@dataclasses.dataclass(frozen=True)
class LengthRun:
    """One prompt length of the committed paper-scale results (``tools/paper_experiment.py``).

    protocol : the :class:`Protocol` it ran; L : the prompt length.
    steps : ndarray (n_records,), the recorded steps; test_mse : ByKind of ndarrays (n_records, S).
    final_mse : ByKind of ndarrays (S,), each start's test MSE at the end.
    key_query : ByKind of Tensors (S, D, D), the trained ``K^T Q``; readout : ByKind of Tensors (S, D).
    bayes, ridge : (value, standard error) of the Bayes risk and ridge's error on the test prompts.
    settled : ByKind of bool ndarrays (S,): had each run stopped moving (its loss flat over the last
    fifth of training)? wall_seconds, code_commit, provenance : how it was made.
    """

    protocol: Protocol
    L: int
    steps: np.ndarray
    test_mse: ByKind
    final_mse: ByKind
    key_query: ByKind
    readout: ByKind
    bayes: tuple
    ridge: tuple
    settled: ByKind
    wall_seconds: float
    code_commit: str | None
    provenance: dict

    def models(self, *, dtype=torch.float32, device=None):
        """The trained models ``[softmax, linear]``, rebuilt from their effective matrices."""
        return [
            FullAttention.from_effective(
                getattr(self.key_query, k).to(dtype=dtype, device=device),
                getattr(self.readout, k).to(dtype=dtype, device=device),
                kind=k,
            )
            for k in KINDS
        ]

    def block_ratios(self, kind):
        """(label row, input read-out) :func:`block_ratios` of each start of ``kind``: two (S,) ndarrays."""
        U = getattr(self.key_query, kind).double()
        return tuple(x.numpy() for x in block_ratios(U, getattr(self.readout, kind).double()))

    def reduced(self):
        """(S,) bool: the starts whose softmax and linear models are both in the reduced basin."""
        sizes = [sum(self.block_ratios(k)) for k in KINDS]
        return (sizes[0] < REDUCED_BASIN) & (sizes[1] < REDUCED_BASIN)


def _length_run(r):
    def by_kind(fn, values):
        return ByKind(*(fn(values[k]) for k in KINDS))

    h, p = r["history"], r["provenance"]
    settled = r.get("settled") or {k: {"settled": [False] * r["settings"]["starts"]} for k in KINDS}
    return LengthRun(
        protocol=Protocol.from_settings(r["settings"]),
        L=r["L"],
        steps=np.asarray(h["steps"]),
        test_mse=by_kind(lambda v: np.asarray(v, dtype=float), h["test_mse"]),
        final_mse=by_kind(lambda v: np.asarray(v, dtype=float), r["final"]["mse"]),
        key_query=by_kind(lambda v: torch.tensor(v, dtype=torch.float64), r["final"]["key_query"]),
        readout=by_kind(lambda v: torch.tensor(v, dtype=torch.float64), r["final"]["output_value"]),
        bayes=(r["baselines"]["bayes"], r["baselines"]["bayes_se"]),
        ridge=(r["baselines"]["ridge"], r["baselines"]["ridge_se"]),
        settled=by_kind(lambda v: np.asarray(v["settled"], dtype=bool), settled),
        wall_seconds=p["wall_seconds"],
        code_commit=p.get("code_commit"),
        provenance=p,
    )


def load_results(doc=None):
    """The committed paper-scale results: ``{"intended": {L: LengthRun}, "released": {...}}``.

    doc : the parsed file (default: ``paper_experiment.json`` beside the running page, or the copy that
    softlin ships; an empty dict when neither exists). Only complete lengths are returned.
    """
    doc = _data.committed_data("paper_experiment.json") if doc is None else doc
    runs = {}
    for r in (doc or {}).get("lengths", []):
        if r.get("complete"):
            run = _length_run(r)
            runs.setdefault(run.protocol.name, {})[run.L] = run
    return {name: dict(sorted(v.items())) for name, v in runs.items()}


class Floor(NamedTuple):
    """The best reduced softmax model found at one length: its test error (mse, se) and (b, ``||A||_F``)."""

    mse: float
    se: float
    b: float
    norm_A: float


class CurvaturePoint(NamedTuple):
    """The Hessian of the error at one trained softmax model, and the descent test along its flattest
    direction on fresh prompts (``tools/paper_scale_references.py --curvature``).

    eigenvalue, eigenvalue_se : the smallest eigenvalue of the pooled Hessian and its standard error
    (the batches' spread of the curvature along its eigenvector). steps : the steps ``t`` tried;
    second_difference, second_difference_se : per step, the mean over fresh prompts of
    ``(e(theta + t u) + e(theta - t u)) / 2 - e(theta)`` and its standard error.
    """

    L: int
    start: int
    reduced: bool
    label_row: float
    readout: float
    eigenvalue: float
    eigenvalue_se: float
    steps: tuple
    second_difference: tuple
    second_difference_se: tuple

    def is_saddle(self, n_se=4.0):
        """A step along the flattest direction lowers the error on fresh prompts: the second difference
        is below zero by more than ``n_se`` standard errors at some step."""
        n_se = check_real("n_se", n_se, nonneg=True)
        return any(m < -n_se * s for m, s in zip(self.second_difference, self.second_difference_se))


class References(NamedTuple):
    """``book/data/paper_scale_references.json``: floors ``{setting: {L: Floor}}``, the curvature
    points, and the longer run (a dict, as recorded)."""

    floors: dict
    curvature: list
    longer_run: dict | None


def load_references(doc=None):
    """The committed reference values of the paper-scale experiment (:class:`References`); ``doc``: the
    parsed file (default: the committed one; None where it is missing)."""
    doc = _data.committed_data("paper_scale_references.json") if doc is None else doc
    if not doc:
        return None
    floors = {
        setting: {int(L): Floor(**v) for L, v in sorted(by_L.items(), key=lambda kv: int(kv[0]))}
        for setting, by_L in doc.get("reduced_softmax_floor", {}).items()
    }
    points = [
        CurvaturePoint(
            p["L"],
            p["start"],
            p["reduced"],
            p["label_row"],
            p["readout"],
            *p["curvature_along_u"],
            tuple(d["step"] for d in p["descent"]),
            tuple(d["second_difference"][0] for d in p["descent"]),
            tuple(d["second_difference"][1] for d in p["descent"]),
        )
        for p in doc.get("curvature", {}).get("points", [])
    ]
    return References(floors, points, doc.get("longer_run"))
