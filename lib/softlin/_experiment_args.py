"""The argument checks of :mod:`softlin.experiment`'s public functions, one per function, run once at
the boundary by :func:`softlin._checks.validated_by` (the functions' bodies trust their arguments).
Each error names the argument, what was received and what was expected (:mod:`softlin._checks`)."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from ._checks import (
    check_bool,
    check_draws,
    check_dtype_device,
    check_memory,
    check_positive_int,
    check_real,
    check_sigma,
)
from .icl import KINDS, PromptSampler, RegressionPrompts

#: The classes of softlin.experiment that arguments must be, registered by that module when it is
#: imported (it imports this one, so this one cannot import it).
CLASSES = {}


def check_type(name, value, cls, what):
    if not isinstance(value, cls):
        raise TypeError(f"{name} must be {what}, got {type(value).__name__}")


def check_models(models, *, pair=False):
    """A list or tuple of FullAttention (with ``pair``: one softmax and one linear)."""
    FullAttention = CLASSES["FullAttention"]
    if not isinstance(models, (list, tuple)) or not models:
        raise TypeError(
            f"models must be a non-empty sequence (list) of FullAttention, got {type(models).__name__}"
        )
    for m in models:
        check_type("models", m, FullAttention, "a non-empty sequence of FullAttention")
    if pair and sorted(m.kind for m in models) != sorted(KINDS):
        raise ValueError(
            f"models must be one softmax and one linear FullAttention, got {[m.kind for m in models]}"
        )


def protocol_fields(p):
    """Protocol.__post_init__: every setting's type and range."""
    for name in ("d", "batch", "steps", "starts", "n_test"):
        check_positive_int(name, getattr(p, name))
    check_positive_int("seed", p.seed, minimum=0)
    check_real("rho", p.rho)
    if not -1 < p.rho < 1:
        raise ValueError(f"rho must lie in (-1, 1) (the KMS covariance), got {p.rho!r}")
    check_real("tau2", p.tau2, positive=True)
    check_real("noise_var", p.noise_var, nonneg=True)
    check_real("lr", p.lr, positive=True)
    check_bool("released", p.released)
    check_bool("separate_starts", p.separate_starts)
    if not isinstance(p.lengths, (tuple, list)) or not p.lengths:
        raise TypeError(
            f"lengths must be a non-empty tuple of positive integers, got {p.lengths!r}"
        )
    for i, L in enumerate(p.lengths):
        check_positive_int(f"lengths[{i}]", L)


def from_settings(cls, settings):
    check_type("settings", settings, Mapping, "a dict of settings (a results file's 'settings')")


def sampler(self, L, *, batch=None, device=None):
    check_positive_int("L", L)
    batch = check_positive_int("batch", batch, allow_none=True) or self.batch
    n_bytes = batch * (2 * (self.d + 1) * (L + 1) + (self.d + 1) ** 2) * 4
    check_memory(f"L = {L}, batch = {batch}", n_bytes, device=device, what="the prompts")


def test_prompts(self, L, n=None, *, device=None, chunk=512):
    check_positive_int("L", L)
    n = check_positive_int("n", n, allow_none=True) or self.n_test
    check_positive_int("chunk", chunk)
    check_draws(f"L = {L}, n = {n}", float(L) * n)


def initialise(
    cls, d, *, kind="softmax", generator=None, dtype=torch.float32, device=None, starts=None
):
    check_positive_int("d", d)
    check_positive_int("starts", starts, allow_none=True)
    from ._checks import check_choice, check_generator

    check_choice("kind", kind, KINDS)
    check_generator(generator)
    check_dtype_device(dtype, device)
    n_bytes = (starts or 1) * (3 * (d + 1) ** 2 + d + 1) * dtype.itemsize
    check_memory(f"d = {d}, starts = {starts}", n_bytes, device=device, what="the weights")


def from_effective(cls, key_query, readout, *, kind="softmax"):
    from ._checks import as_tensor_arg

    KQ, v = as_tensor_arg("key_query", key_query), as_tensor_arg("readout", readout)
    if KQ.dim() not in (2, 3) or KQ.shape[-1] != KQ.shape[-2] or KQ.shape[-1] < 2:
        raise ValueError(
            f"key_query must have shape (D, D) or (S, D, D), D >= 2, got {tuple(KQ.shape)}"
        )
    if tuple(v.shape) != tuple(KQ.shape[:-1]):
        raise ValueError(
            f"readout must have shape {tuple(KQ.shape[:-1])} (that of key_query), got {tuple(v.shape)}"
        )


def experiment_starts(d, starts, *, generator=None, separate=False, device=None):
    initialise(None, d, generator=generator, device=device, starts=starts)
    check_bool("separate", separate)


def sgd_run(models, sampler, stream, lr, steps, *, done=0):
    check_models(models)
    check_type("sampler", sampler, PromptSampler, "a softlin.icl.PromptSampler")
    check_type("stream", stream, torch.Generator, "a torch.Generator")
    check_real("lr", lr, positive=True)
    check_positive_int("steps", steps)
    check_positive_int("done", done, minimum=0)
    if done > steps:
        raise ValueError(
            f"done must be at most steps = {steps} (the steps already run), got {done}"
        )


def train(protocol, L, *, device=None, progress=False):
    check_type("protocol", protocol, CLASSES["Protocol"], "a Protocol")
    check_positive_int("L", L)
    check_bool("progress", progress)
    check_draws(f"L = {L}, steps = {protocol.steps}", float(L) * protocol.steps * protocol.batch)


def sgd_step(models, prompts, lr, *, fused=True):
    check_models(models)
    check_type("prompts", prompts, RegressionPrompts, "softlin.icl.RegressionPrompts")
    check_real("lr", lr, positive=True)
    check_bool("fused", fused)


def held_out_prompts(Sigma, L, n, *, tau2=1.0, noise_var=0.0, released=False, chunk=512, seed=None):
    check_sigma(Sigma)
    check_positive_int("L", L)
    check_positive_int("n", n)
    check_positive_int("chunk", chunk)
    check_real("tau2", tau2, positive=True)
    check_real("noise_var", noise_var, nonneg=True)
    check_bool("released", released)
    check_positive_int("seed", seed, minimum=0, allow_none=True)
    check_draws(f"L = {L}, n = {n}", float(L) * n)


def bayes_errors(prompts, *, tau2, noise_var):
    check_type("prompts", prompts, RegressionPrompts, "softlin.icl.RegressionPrompts")
    check_real("tau2", tau2, positive=True)
    check_real("noise_var", noise_var, positive=True)  # the posterior needs label noise


def evaluate(models, protocol, L, *, n=None, baselines=True, device=None):
    check_models(models, pair=True)
    check_type("protocol", protocol, CLASSES["Protocol"], "a Protocol")
    test_prompts(protocol, L, n)
    check_bool("baselines", baselines)
    if baselines and protocol.noise_var == 0:
        raise ValueError("baselines need a protocol with noise_var > 0 (the Bayes posterior)")
