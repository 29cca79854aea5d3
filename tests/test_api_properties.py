"""Every bad argument of every public name gets a clear error, or the call returns a finite result
(issue 33): a property over the whole public API, generated from the functions' own signatures and the
table ``EXAMPLES`` of valid calls.

One argument at a time is replaced by a bad value of the kind the valid one suggests: None, a string, a
list, NaN or inf entries, an integer or complex dtype, an extra dimension, an empty or too-wide tensor,
zero, negative, fractional or absurdly large sizes, a non-PSD or asymmetric matrix, a wrong type for a
flag, a generator, a measure or a callable. The call must then either raise a ValueError or TypeError
whose message names the argument, or return a finite result (every tensor, array and number in it
finite), within a few seconds of CPU. Nothing else: no AttributeError from deep inside, no silent NaN,
no allocation that takes the machine down, no loop that runs for hours.

Adding a public function (or a module) is one entry of ``EXAMPLES``: its qualified name and a valid call
(``call(...)``; ``method(receiver, ...)`` for a method). ``test_every_public_name_has_an_example``
fails until the entry exists. An entry may declare outcomes its function documents besides the two
errors (``allowed``: the AssertionError of a failed claim, the KeyError of an unknown label) and where
a NaN or inf in the result is documented (``non_finite``: where the mathematics diverges, decided by a
predicate on the arguments computed here, independently of the library).
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import math
import os
import re
import signal
import time
from dataclasses import dataclass, field, fields, is_dataclass

import numpy as np
import pytest
import softlin as sl
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from softlin import experiment as ex
from softlin import icl, montecarlo
from softlin import stability as stab
from softlin.book import modes

pytestmark = pytest.mark.unit

F64 = torch.float64
MAX_SECONDS = 5.0  # CPU seconds one call may take, good or bad


def t(x):
    return torch.tensor(x, dtype=F64)


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def rand(*shape, seed=0):
    return torch.randn(*shape, dtype=F64, generator=gen(seed))


SIGMA3 = icl.kms_covariance(3, 0.5)
A3, B3 = 0.3 * torch.eye(3, dtype=F64), t(0.5)
GAUSS2 = sl.GaussianMeasure(t([0.2, -0.1]), t([[1.0, 0.3], [0.3, 0.5]]))


# --------------------------------------------------------------------------------------------------
# The table of valid calls


@dataclass
class Call:
    """A valid call: ``fn(*args, **kwargs)`` (on a fresh ``receiver()`` for a method)."""

    args: tuple
    kwargs: dict
    receiver: object = None
    #: exception types the function documents as an outcome besides ValueError and TypeError
    allowed: tuple = ()
    #: ``non_finite(arguments, where)``: the result is documented to hold a NaN or inf ``where`` for
    #: these arguments (the mathematics diverges there: decided here, independently of the library)
    non_finite: object = None
    #: arguments not replaced, with the reason
    keep: dict = field(default_factory=dict)


def call(*args, allowed=(), non_finite=None, keep=None, **kwargs):
    return Call(args, kwargs, None, allowed, non_finite, keep or {})


def method(receiver, *args, allowed=(), keep=None, **kwargs):
    return Call(args, kwargs, receiver, allowed, None, keep or {})


def _averaged_diverges(a, where):
    """query_averaged_expansion: C is infinite once 2 lambda_max(S^T U^T cov U S) >= 1 (S S^T =
    query_cov), B_bar NaN once 6 lambda_max >= 1 (independently, with NumPy)."""
    U, cov = (np.asarray(a[k], dtype=float) for k in ("U", "cov"))
    qc = a.get("query_cov")
    S = np.eye(len(cov)) if qc is None else np.linalg.cholesky(np.asarray(qc))
    lam = np.linalg.eigvalsh(S.T @ U.T @ cov @ U @ S).max()
    return (2 if where == "result[0]" else 6) * lam >= 1 - 1e-9


def _fluctuation_diverges(a, where):
    A, S = (np.asarray(a[k], dtype=float) for k in ("A", "Sigma"))
    return (
        a.get("allow_infinite") is True
        and np.linalg.eigvalsh(np.linalg.inv(S) - 2 * A.T @ S @ A).min() <= 0
    )


def _beyond_the_dtype(a, where):
    """The Gaussian expansions: e^{3s}, s = a^T cov a (a = U z), beyond float64's range (documented
    IEEE overflow of that entry)."""
    U, cov, z = (np.asarray(a[k], dtype=float) for k in ("U", "cov", "queries"))
    av = z @ U.T
    return 3 * ((av @ cov) * av).sum(-1).max() > math.log(np.finfo(np.float64).max)


def _no_chi2_without_errors(a, where):
    """fit_power_law: chi2_dof is NaN (documented) when no standard errors are given."""
    return a.get("stderr") is None and where == "result[3]"


def _plot(ax, x=1.0):
    ax.plot([0, 1], [0, x])


def _sampler():
    return icl.PromptSampler(SIGMA3, 6, 4)


def _empirical_risk():
    return stab.EmpiricalRisk.draw(SIGMA3, 6, 8, generator=gen(4))


def _trajectory():
    return icl.infinite_prompt_flow(A3, B3, SIGMA3, [0.0, 0.5])


def _fit():
    return montecarlo.fit_power_law([10.0, 20.0, 40.0], [1.0, 0.52, 0.24])


def _sums():
    return sl.TiltedSums(rand(2, 1, 3, seed=5))


def _gaussian_law():
    return sl.GaussianMeasure(t([0.2, -0.1]), t([[1.0, 0.3], [0.3, 0.5]]))


def _protocol():  # a tiny protocol: the experiment's code paths at sizes a property call affords
    return ex.Protocol(d=2, steps=3, starts=2, lengths=(6,), n_test=8, batch=4, lr=0.01)


def _models():
    return _protocol().initial_models()


def _prompts():
    return next(_protocol().test_prompts(6, 8))


def _attention():
    return ex.FullAttention.initialise(2, generator=gen(6), dtype=F64, starts=2)


def _evaluation():
    err = rand(2, 4, seed=7).abs()  # (S, n): 2 starts, 4 prompts
    return ex.Evaluation(
        err, err + 0.1, bayes=t([0.1, 0.2, 0.1, 0.3]), ridge=t([0.1, 0.2, 0.2, 0.3])
    )


def _curvature_point():
    return ex.load_references().curvature[0]


TOKENS, QUERIES = rand(2, 6, 3, seed=1), rand(2, 2, 3, seed=2)
U3, V3 = 0.4 * rand(3, 3, seed=3), rand(2, 3, seed=4)
CLAIM = {"allowed": (AssertionError,)}  # a check that fails its claim raises AssertionError

EXAMPLES = {
    # softlin.attention
    "softlin.attention.softmax_attention": lambda: call(
        TOKENS, QUERIES, U3, V3, weights=torch.ones(2, 6, dtype=F64), chunk_size=4
    ),
    "softlin.attention.linear_attention": lambda: call(
        TOKENS, QUERIES, U3, V3, weights=torch.ones(2, 6, dtype=F64)
    ),
    "softlin.attention.softmax_weights": lambda: call(TOKENS, QUERIES, U3),
    "softlin.attention.tilted_mean": lambda: call(TOKENS, QUERIES),
    "softlin.attention.linear_mean": lambda: call(TOKENS, QUERIES),
    "softlin.attention.tilted_moments": lambda: call(TOKENS, QUERIES, second=True, chunk_size=4),
    "softlin.attention.TiltedSums": lambda: call(QUERIES, second=True),
    "softlin.attention.TiltedSums.update": lambda: method(_sums, rand(2, 4, 3, seed=6)),
    "softlin.attention.TiltedSums.moments": lambda: method(
        lambda: _sums().update(rand(2, 4, 3, seed=6))
    ),
    # softlin.measures
    "softlin.measures.TokenMeasure": call,
    "softlin.measures.GaussianMeasure": lambda: call(t([0.2, -0.1]), t([[1.0, 0.3], [0.3, 0.5]])),
    "softlin.measures.EmpiricalMeasure": lambda: call(rand(5, 2), t([1.0, 2.0, 0.5, 1.0, 1.0])),
    "softlin.measures.GaussianMixtureMeasure": lambda: call(
        rand(2, 2), torch.eye(2, dtype=F64).expand(2, 2, 2).clone(), t([0.3, 0.7])
    ),
    "softlin.measures.RademacherMeasure": lambda: call(3, dtype=F64, device="cpu"),
    "softlin.measures.UniformMeasure": lambda: call(3, 1.5, dtype=F64, device="cpu"),
    "softlin.measures.StudentTMeasure": lambda: call(3, 4.0, dtype=F64, device="cpu"),
    "softlin.measures.LogNormalMeasure": lambda: call(3, 0.5, dtype=F64, device="cpu"),
    "softlin.measures.GaussianMeasure.sample": lambda: method(_gaussian_law, 7, generator=gen()),
    "softlin.measures.GaussianMeasure.tilted_mean": lambda: method(_gaussian_law, rand(4, 2)),
    "softlin.measures.GaussianMeasure.tilted_covariance": lambda: method(_gaussian_law, rand(4, 2)),
    "softlin.measures.RademacherMeasure.tilted_mean": lambda: method(
        lambda: sl.RademacherMeasure(2), rand(4, 2)
    ),
    "softlin.measures.RademacherMeasure.tilted_covariance": lambda: method(
        lambda: sl.RademacherMeasure(2), rand(4, 2)
    ),
    "softlin.measures.StudentTMeasure.sample": lambda: method(
        lambda: sl.StudentTMeasure(2, 3.0), 5, generator=gen()
    ),
    "softlin.measures.attention_limit": lambda: call(
        GAUSS2, rand(3, 2), 0.5 * rand(2, 2), rand(1, 2)
    ),
    "softlin.measures.linear_attention_limit": lambda: call(
        GAUSS2, rand(3, 2), 0.5 * rand(2, 2), rand(1, 2)
    ),
    "softlin.measures.gaussian_attention_limit": lambda: call(
        rand(3, 2), 0.5 * rand(2, 2), rand(1, 2), t([0.2, -0.1]), t([[1.0, 0.3], [0.3, 0.5]])
    ),
    "softlin.measures.gaussian_range_factor": lambda: call(t([[1.0, 0.3], [0.3, 0.5]])),
    "softlin.measures.gauss_hermite_rule": lambda: call(
        t([0.2, -0.1]), t([[1.0, 0.3], [0.3, 0.5]]), 5
    ),
    # softlin.montecarlo
    "softlin.montecarlo.prompt_batches": lambda: call(GAUSS2, 5, 7, generator=gen(), max_tokens=20),
    "softlin.montecarlo.mean_and_stderr": lambda: call([1.0, 2.0, 4.0], dim=0),
    "softlin.montecarlo.paired_difference": lambda: call(rand(6), rand(6, seed=1), dim=0),
    "softlin.montecarlo.fit_power_law": lambda: call(
        [10.0, 20.0, 40.0],
        [1.0, 0.52, 0.24],
        [0.05, 0.03, 0.02],
        non_finite=_no_chi2_without_errors,
    ),
    "softlin.montecarlo.PowerLawFit.predict": lambda: method(_fit, [50.0, 100.0]),
    "softlin.montecarlo.check_close": lambda: call(
        1.0, 1.01, se=0.01, n_se=4.0, slack=0.001, what="value", **CLAIM
    ),
    "softlin.montecarlo.check_below": lambda: call(
        0.5, 1.0, se=0.01, n_se=4.0, slack=0.001, what="value", **CLAIM
    ),
    "softlin.montecarlo.check_above": lambda: call(
        1.5, 1.0, se=0.01, n_se=4.0, slack=0.001, what="value", **CLAIM
    ),
    "softlin.montecarlo.check_true": lambda: call(True, what="claim", detail="detail", **CLAIM),
    # softlin.concentration
    "softlin.concentration.sample_errors": lambda: call(
        GAUSS2,
        rand(3, 2),
        0.5 * rand(2, 2),
        rand(1, 2),
        20,
        4,
        generator=gen(),
        jacobians=True,
        chunk_size=8,
    ),
    "softlin.concentration.fixed_query_mse_expansion": lambda: call(
        rand(3, 2),
        0.3 * rand(2, 2),
        rand(1, 2),
        t([[1.0, 0.3], [0.3, 0.5]]),
        non_finite=_beyond_the_dtype,
    ),
    "softlin.concentration.delta_method_expansion": lambda: call(
        rand(2, 2),
        0.3 * rand(2, 2),
        rand(1, 2),
        t([[1.0, 0.3], [0.3, 0.5]]),
        "grad_U",
        non_finite=_beyond_the_dtype,
    ),
    "softlin.concentration.query_averaged_expansion": lambda: call(
        0.1 * rand(2, 2),
        rand(1, 2),
        t([[1.0, 0.3], [0.3, 0.5]]),
        "output",
        query_cov=t([[0.5, 0.0], [0.0, 0.8]]),
        non_finite=_averaged_diverges,
    ),
    "softlin.concentration.ess_ratio_expansion": lambda: call(
        rand(3, 2), 0.3 * rand(2, 2), t([[1.0, 0.3], [0.3, 0.5]]), non_finite=_beyond_the_dtype
    ),
    "softlin.concentration.heuristic_rate_exponent": lambda: call([0.3, 0.9]),
    # softlin.icl
    "softlin.icl.kms_covariance": lambda: call(4, 0.5, dtype=F64, device="cpu"),
    "softlin.icl.PromptSampler": lambda: call(SIGMA3, 6, 4, tau2=0.5, noise_var=0.1, released=True),
    "softlin.icl.PromptSampler.sample": lambda: method(_sampler, gen()),
    "softlin.icl.sample_prompts": lambda: call(
        SIGMA3, 6, 4, tau2=0.5, noise_var=0.1, generator=gen(), released=False
    ),
    "softlin.icl.reduced_attention_matrices": lambda: call(A3, B3),
    "softlin.icl.conditional_risk": lambda: call(
        A3, B3, rand(4, 6, 3), rand(4, 3, seed=1), kind="softmax", tau2=0.5, noise_var=0.1
    ),
    "softlin.icl.finite_prompt_risk": lambda: call(
        A3,
        B3,
        SIGMA3,
        6,
        n_prompts=20,
        generator=gen(),
        kind="linear",
        tau2=0.5,
        noise_var=0.1,
        batch_size=8,
        dtype=F64,
    ),
    "softlin.icl.linear_finite_prompt_risk": lambda: call(
        A3, B3, SIGMA3, 6, tau2=0.5, noise_var=0.1
    ),
    "softlin.icl.input_covariances": lambda: call(SIGMA3, released=True),
    "softlin.icl.linear_class_optimum": lambda: call(
        SIGMA3, 6, tau2=0.5, noise_var=0.1, released=True
    ),
    "softlin.icl.risk_fluctuation_constant": lambda: call(
        A3, B3, SIGMA3, tau2=0.5, allow_infinite=False, non_finite=_fluctuation_diverges
    ),
    "softlin.icl.infinite_prompt_risk": lambda: call(A3, B3, SIGMA3, tau2=0.5, noise_var=0.1),
    "softlin.icl.infinite_prompt_risk_grad": lambda: call(A3, B3, SIGMA3, tau2=0.5),
    "softlin.icl.bayes_optimal_parameters": lambda: call(SIGMA3),
    "softlin.icl.balanced_initialisation": lambda: call(
        3, 0.4, rank=2, generator=gen(), dtype=F64, device="cpu"
    ),
    "softlin.icl.initialisation_bound": lambda: call(SIGMA3),
    "softlin.icl.infinite_prompt_flow": lambda: call(
        A3,
        B3,
        SIGMA3,
        [0.0, 0.5, 1.0],
        tau2=0.5,
        rtol=1e-6,
        atol=1e-8,
        method="RK45",
        allowed=(RuntimeError,),  # documented: the flow from a far start may diverge
    ),
    "softlin.icl.Trajectory.distance_to": lambda: method(_trajectory, A3, B3),
    # softlin.stability
    "softlin.stability.gap_terms": lambda: call(
        A3, rand(4, 6, 3), rand(4, 3, seed=1), SIGMA3, kind="linear"
    ),
    "softlin.stability.risk_gap": lambda: call(
        A3, B3, SIGMA3, 6, n_prompts=10, generator=gen(), kind="softmax", dtype=F64
    ),
    "softlin.stability.EmpiricalRisk": lambda: call(
        SIGMA3, rand(4, 6, 3), rand(4, 3, seed=1), kind="softmax"
    ),
    "softlin.stability.EmpiricalRisk.draw": lambda: call(
        SIGMA3, 6, 8, generator=gen(), kind="linear", dtype=F64
    ),
    "softlin.stability.EmpiricalRisk.gap": lambda: method(_empirical_risk, A3, B3),
    "softlin.stability.EmpiricalRisk.value": lambda: method(_empirical_risk, A3, B3),
    "softlin.stability.EmpiricalRisk.gap_gradient": lambda: method(_empirical_risk, A3, B3),
    "softlin.stability.EmpiricalRisk.velocity": lambda: method(_empirical_risk, A3, B3),
    "softlin.stability.EmpiricalRisk.flow": lambda: method(
        _empirical_risk,
        A3,
        B3,
        [0.0, 0.2],
        rtol=1e-4,
        atol=1e-6,
        method="RK45",
        allowed=(RuntimeError,),  # documented: the flow from a far start may diverge
    ),
    "softlin.stability.infinite_risk_hessian": lambda: call(A3, B3, SIGMA3),
    "softlin.stability.gronwall_envelope": lambda: call([0.0, 0.5, 1.0], 0.1, [0.2, 0.3, 0.4]),
    "softlin.stability.trajectory_distance": lambda: call(_trajectory(), _trajectory()),
    # softlin.experiment
    "softlin.experiment.Protocol": lambda: call(
        d=2,
        rho=0.5,
        tau2=0.2,
        noise_var=0.1,
        lr=0.01,
        batch=4,
        steps=3,
        starts=2,
        lengths=(6, 12),
        n_test=8,
        seed=0,
        released=False,
        separate_starts=False,
    ),
    "softlin.experiment.Protocol.from_settings": lambda: call({"d": 2, "steps": 3, "lr": 0.01}),
    "softlin.experiment.Protocol.replace": lambda: method(_protocol, steps=4),
    "softlin.experiment.Protocol.covariance": lambda: method(_protocol, dtype=F64),
    "softlin.experiment.Protocol.sampler": lambda: method(_protocol, 6, batch=4),
    "softlin.experiment.Protocol.test_prompts": lambda: method(_protocol, 6, 8, chunk=4),
    "softlin.experiment.FullAttention": lambda: call(
        0.1 * rand(3, 3),
        0.1 * rand(3, 3, seed=1),
        rand(3, 3, seed=2),
        rand(3, seed=3),
        kind="linear",
    ),
    "softlin.experiment.FullAttention.initialise": lambda: call(
        2, kind="softmax", generator=gen(), dtype=F64, starts=2
    ),
    "softlin.experiment.FullAttention.from_effective": lambda: call(
        0.1 * rand(3, 3), rand(3, seed=1), kind="softmax"
    ),
    "softlin.experiment.FullAttention.predict": lambda: method(
        _attention, rand(2, 5, 3, seed=4), rand(2, 1, 3, seed=5)
    ),
    "softlin.experiment.FullAttention.clone": lambda: method(_attention, kind="linear"),
    "softlin.experiment.experiment_starts": lambda: call(2, 2, generator=gen(), separate=True),
    "softlin.experiment.sgd_step": lambda: call(_models(), _prompts(), 0.01, fused=True),
    "softlin.experiment.sgd_run": lambda: call(
        _models(), _protocol().sampler(6), gen(1), 0.01, 3, done=0
    ),
    "softlin.experiment.train": lambda: call(_protocol(), 6, progress=False),
    "softlin.experiment.held_out_prompts": lambda: call(
        SIGMA3, 6, 8, tau2=0.5, noise_var=0.1, released=False, chunk=4, seed=1
    ),
    "softlin.experiment.bayes_errors": lambda: call(_prompts(), tau2=0.2, noise_var=0.1),
    "softlin.experiment.evaluate": lambda: call(_models(), _protocol(), 6, n=8, baselines=True),
    "softlin.experiment.Evaluation.errors": lambda: method(_evaluation, "softmax"),
    "softlin.experiment.Evaluation.excess": lambda: method(_evaluation, "linear"),
    "softlin.experiment.block_ratios": lambda: call(rand(2, 3, 3), rand(2, 3, seed=1)),
    "softlin.experiment.zero_block_size": lambda: call(rand(2, 3, 3), rand(2, 3, seed=1)),
    "softlin.experiment.load_results": lambda: call(keep={"doc": "None: the committed file"}),
    "softlin.experiment.load_references": lambda: call(keep={"doc": "None: the committed file"}),
    "softlin.experiment.CurvaturePoint.is_saddle": lambda: method(_curvature_point, n_se=4.0),
    # softlin.icl, softlin.montecarlo, softlin.concentration: the large-prompt constants and fits
    "softlin.icl.large_prompt_constants": lambda: call(SIGMA3, tau2=0.5, noise_var=0.1),
    "softlin.montecarlo.fit_limit": lambda: call(
        [100.0, 200.0, 400.0, 800.0], [20.6, 20.3, 20.2, 20.1], [0.1, 0.1, 0.1, 0.1]
    ),
    "softlin.montecarlo.start_trend": lambda: call(
        [1.0, 2.0, 3.0, 4.0], [[1.0, 1.2], [2.1, 2.0], [2.9, 3.3], [4.2, 4.0]], [0.1, 0.1, 0.1, 0.1]
    ),
    "softlin.concentration.query_averaged_rates": lambda: call(
        [0.3, 0.5], [16, 32, 64], 8, generator=gen(), nodes=(8,)
    ),
    # softlin.book.quiz
    "softlin.book.quiz.AnswerKey": call,
    "softlin.book.quiz.answer_key": call,
    "softlin.book.quiz.Quiz": lambda: call("01_measure_view", allowed=(KeyError,)),
    "softlin.book.quiz.quiz_questions": lambda: call("01_measure_view", allowed=(KeyError,)),
    "softlin.book.quiz.show_quiz": lambda: call("01_measure_view", allowed=(KeyError,)),
    # softlin.book and its modules
    "softlin._data.committed_data": lambda: call("absent.json"),
    "softlin._data.seed_record_summary": lambda: call("03_concentration", "absent"),
    "softlin._data.seed_ranges": lambda: call(["0", "1", "2", "5"]),
    "softlin.book.modes.select_sizes": lambda: call(
        {m: {"L": 1} for m in modes.MODES}, "fast", show=False
    ),
    "softlin.book.modes.check_device": lambda: call("cpu"),
    "softlin.book.plotting.use_book_style": call,
    "softlin.book.plotting.series_styles": lambda: call(3),
    "softlin.book.widgets.explorer": lambda: call(
        _plot,
        keep={"x": "a control: any ipywidgets abbreviation, a text box included"},
        x=[1.0, 2.0],
    ),
    "softlin.book.widgets.small_multiples": lambda: call(
        _plot, [{"x": 1.0}, {"x": 2.0}], ncols=2, panel_size=(2.0, 1.5), sharex=True, sharey="row"
    ),
    "softlin.book.widgets.show_source": lambda: call(sl.tilted_mean, docstring=True),
    "softlin.book.widgets.make_check": lambda: call(
        lambda: 2.0, rtol=1e-3, atol=0.0, digits=3, inputs=None, hint="a hint"
    ),
    "softlin.book.widgets.answer_check": lambda: call(  # a str is a label: KeyError if unknown
        lambda: 2.0,
        rtol=1e-3,
        atol=0.0,
        digits=None,
        inputs=None,
        hint="a hint",
        allowed=(KeyError,),
    ),
}

#: Public names that are not called: values, records the library returns, apparatus owned elsewhere.
NOT_CALLED = {
    "softlin.attention.TiltedMoments": "a record of results (NamedTuple) that TiltedSums returns",
    "softlin.concentration.PromptErrors": "a record of results (NamedTuple) that sample_errors returns",
    "softlin.montecarlo.MonteCarloEstimate": "a record of results (NamedTuple)",
    "softlin.montecarlo.PowerLawFit": "a record of results (NamedTuple); its predict is called",
    "softlin.icl.RegressionPrompts": "a record (views of a PromptSampler's buffers)",
    "softlin.icl.Trajectory": "a record of results of the flows; its distance_to is called",
    "softlin.book.plotting.OKABE_ITO": "a constant (the palette)",
    "softlin.experiment.INTENDED": "a constant (the theory's protocol); its methods are called",
    "softlin.experiment.RELEASED": "a constant (the released script's protocol)",
    "softlin.experiment.PAPER_LENGTHS": "a constant (the paper's prompt lengths)",
    "softlin.experiment.REDUCED_BASIN": "a constant (the threshold of zero_block_size)",
    "softlin.experiment.ByKind": "a record (NamedTuple): one value per model",
    "softlin.experiment.CurvaturePoint": "a record of the committed file; its is_saddle is called",
    "softlin.experiment.Evaluation": "a record that evaluate returns; its errors, excess are called",
    "softlin.experiment.Floor": "a record of the committed file",
    "softlin.experiment.References": "a record that load_references returns",
    "softlin.experiment.LengthRun": "a record that load_results returns",
    "softlin.icl.LargePromptConstants": "a record that large_prompt_constants returns",
    "softlin.montecarlo.LimitFit": "a record that fit_limit returns",
    "softlin.montecarlo.StartTrend": "a record that start_trend returns",
}
#: Modules whose names are covered by their owners (the exercises' keys are the pages' side).
ELSEWHERE = {"softlin.book.exercises"}


def modules():
    """Every public module of softlin (found, not listed: a new module's names need entries)."""
    import pkgutil

    found = ["softlin"] + [m.name for m in pkgutil.walk_packages(sl.__path__, "softlin.")]
    return [
        m for m in found if m not in ELSEWHERE and not any(p.startswith("_") for p in m.split("."))
    ]


def public_names():
    """``module.name`` of every name in ``softlin.__all__`` and each module's ``__all__`` (or, for a
    module without one, such as softlin.book's ``__init__``, the public names it defines)."""
    names = set()
    for m in modules():
        module = importlib.import_module(m)
        listed = getattr(module, "__all__", None)
        if listed is None:
            listed = [
                n
                for n, v in vars(module).items()
                if not n.startswith("_") and getattr(v, "__module__", None) == m
            ]
        for n in listed:  # named where it is defined (softlin.__all__ re-exports the engine's)
            owner = getattr(getattr(module, n), "__module__", None)
            names.add(f"{owner}.{n}" if owner and owner.startswith("softlin") else f"{m}.{n}")
    return names


def resolve(qualified):
    """The function, class or unbound method a qualified name names."""
    parts = qualified.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        for p in parts[k:]:
            obj = getattr(obj, p)
        return obj
    raise LookupError(qualified)


# --------------------------------------------------------------------------------------------------
# Bad values, by the kind of the valid one


def _square(x):
    return isinstance(x, torch.Tensor) and x.dim() >= 2 and x.shape[-1] == x.shape[-2] >= 2


def one(label, value):
    """A category of one bad value: (its representative, a strategy that draws it)."""
    return (label, value), st.just((label, value))


def drawn(strategy, representative, label):
    """A category drawn from ``strategy`` (``label(v)`` names each draw), ``representative`` first."""
    return (label(representative), representative), strategy.map(lambda v: (label(v), v))


def tensor_categories(x):
    """The categories of bad values of a valid floating-point tensor ``x``."""
    out = [
        one("None", None),
        drawn(st.text(max_size=4), "abc", lambda v: f"the string {v!r}"),
        one("a list", x.tolist()),
        one("an integer dtype", x.round().to(torch.int64)),
        one("a complex dtype", x.to(torch.complex128)),
        one("an extra dimension", x.unsqueeze(0)),
    ]
    if x.numel():

        def planted(value, k):
            y = x.clone()
            y.view(-1)[k % x.numel()] = value
            return y

        ks = st.integers(0, x.numel() - 1)
        for value in (math.nan, math.inf, -math.inf):
            draw = ks.map(lambda k, v=value: (f"{v} at entry {k}", planted(v, k)))
            out.append(((f"{value} at entry 0", planted(value, 0)), draw))
    if x.dim() >= 1:
        out.append(one("an empty tensor", x[:0]))
        out.append(one("one column too wide", torch.cat([x, x[..., :1]], -1)))
    if _square(x):
        n = x.shape[-1]
        upper, eye = torch.triu(torch.ones(n, n, dtype=x.dtype), 1), torch.eye(n, dtype=x.dtype)
        cs = st.floats(0.1, 10)
        out.append(
            (
                ("asymmetric (+1 upper)", x + upper),
                cs.map(lambda c: (f"asymmetric (+{c:.2g} upper)", x + c * upper)),
            )
        )
        out.append(
            (
                ("not PSD (-I)", -eye.expand_as(x)),
                cs.map(lambda c: (f"not PSD (-{c:.2g} I)", -c * eye.expand_as(x))),
            )
        )
    return out


def categories(x):
    """The categories of bad values of the valid value ``x`` of an argument: a list of (representative
    (label, value), strategy of (label, value))."""
    wrong = [one("None", None), drawn(st.text(max_size=4), "abc", lambda v: f"the string {v!r}")]
    if isinstance(x, torch.Tensor):
        return tensor_categories(x)
    if isinstance(x, bool):
        return [*wrong, one("the integer 1", 1), one("a list", [x])]
    if isinstance(x, int):
        fractional = st.floats(0.01, 1e6).filter(lambda v: v != int(v))
        return [
            *wrong,
            one("zero", 0),
            drawn(st.integers(-(10**6), -1), -1, lambda n: f"negative {n}"),
            drawn(fractional, 2.5, lambda v: f"fractional {v:.3g}"),
            drawn(st.integers(10**12, 10**18), 10**13, lambda n: f"absurdly large {n:.1e}"),
            one("a list", [x]),
        ]
    if isinstance(x, float):
        return [
            *wrong,
            one("NaN", math.nan),
            one("inf", math.inf),
            one("-inf", -math.inf),
            one("zero", 0.0),
            drawn(st.floats(-1e6, -1e-6), -1.0, lambda v: f"negative {v:.3g}"),
            one("a list", [x]),
        ]
    if isinstance(x, str):
        return [one("None", None), one("an integer", 3), one("a list", [x])]
    if isinstance(x, list) and all(isinstance(v, (int, float)) for v in x):
        return [
            *wrong,
            one("a NaN entry", [*x[:-1], math.nan]),
            one("an inf entry", [*x[:-1], math.inf]),
            one("a ragged list", [x, [1.0]]),
            one("complex numbers", [complex(v, 1) for v in x]),
            one("an extra dimension", [x]),
            one("empty", []),
            one("one entry too many", [*x, x[-1]]),
        ]
    if isinstance(x, torch.Generator):
        return [*wrong, one("an int", 123)]
    if isinstance(x, sl.TokenMeasure):
        return [
            *wrong,
            one("a tensor", torch.zeros(2, dtype=F64)),
            one("a heavy-tailed law", sl.StudentTMeasure(x.dim, 3.0)),
        ]
    if isinstance(x, torch.dtype):
        return [*wrong, one("int64", torch.int64), one("complex128", torch.complex128)]
    return [*wrong, one("an int", 3)]


def bad_values(x):
    """Strategy of (label, bad value) for the valid value ``x`` of an argument."""
    return st.one_of([strategy for _, strategy in categories(x)])


# --------------------------------------------------------------------------------------------------
# The property


class TookTooLong(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds):
    """Stop a call (a Python loop that would run for hours) after ``seconds`` of wall time."""

    def stop(signum, frame):
        raise TookTooLong

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def non_finite(result, path="result"):
    """Where ``result`` holds a NaN or inf (a tensor, array or number, in tuples, lists, dicts,
    NamedTuples and dataclasses), or None."""
    if isinstance(result, torch.Tensor):
        if result.is_floating_point() or result.is_complex():
            return None if bool(torch.isfinite(result).all()) else path
        return None
    if isinstance(result, np.ndarray):
        return None if result.dtype.kind not in "fc" or np.isfinite(result).all() else path
    if isinstance(result, (float, np.floating)):
        return None if math.isfinite(result) else path
    if isinstance(result, (tuple, list)):
        return next((w for k, r in enumerate(result) if (w := non_finite(r, f"{path}[{k}]"))), None)
    if isinstance(result, dict):
        return next((w for k, r in result.items() if (w := non_finite(r, f"{path}[{k!r}]"))), None)
    if is_dataclass(result) and not isinstance(result, type):
        return next(
            (
                w
                for f in fields(result)
                if (w := non_finite(getattr(result, f.name), f"{path}.{f.name}"))
            ),
            None,
        )
    return None


def names_argument(message, name):
    """Whether an error message names the argument ``name`` (the letter a must be followed by a
    verb, so that the article does not count)."""
    if name == "a":
        return re.search(r"(?<![\w.])a (must|has)\b", message) is not None
    return re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", message) is not None


def slots(qualified):
    """The arguments of an example that are replaced: (name, where) with where an index of ``args`` or
    a keyword."""
    ex = EXAMPLES[qualified]()
    fn = resolve(qualified)
    params = list(inspect.signature(fn).parameters.values())
    if ex.receiver is not None:
        params = params[1:]  # self
    out = []
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    for k in range(len(ex.args)):
        name = positional[k].name if k < len(positional) else f"args[{k}]"
        out.append((name, k))
    out += [(key, key) for key in ex.kwargs]
    return [(name, where) for name, where in out if name not in ex.keep]


def run(qualified, name, where, value):
    """Call the example of ``qualified`` with the argument ``name`` (at ``where``) replaced by ``value``:
    None if the outcome is one the property allows, else what went wrong."""
    ex = EXAMPLES[qualified]()
    args, kwargs = list(ex.args), dict(ex.kwargs)
    if isinstance(where, int):
        args[where] = value
    else:
        kwargs[where] = value
    fn = resolve(qualified)
    if ex.receiver is not None:
        fn = getattr(ex.receiver(), qualified.rpartition(".")[2])
    start = time.process_time()
    try:
        with time_limit(4 * MAX_SECONDS):
            result = fn(*args, **kwargs)
            if inspect.isgenerator(result):
                result = next(result)
    except TookTooLong:
        return f"ran for more than {4 * MAX_SECONDS:g} s"
    except (ValueError, TypeError) as exc:
        if not names_argument(str(exc), name):
            return f"{type(exc).__name__} does not name {name!r}: {exc}"
        return None
    except ex.allowed:
        return None
    except Exception as exc:  # noqa: BLE001 (what the property forbids: any other error)
        return f"{type(exc).__name__}: {exc}"
    finally:
        import matplotlib.pyplot as plt

        plt.close("all")
    seconds = time.process_time() - start
    if seconds > MAX_SECONDS:
        return f"took {seconds:.1f} s of CPU"
    where_bad = non_finite(result)
    if where_bad is not None:
        bound = dict(kwargs)
        bound.update({n: args[w] for n, w in SLOT_NAMES[qualified] if isinstance(w, int)})
        if ex.non_finite is not None and ex.non_finite(bound, where_bad):
            return None
        return f"returned a non-finite {where_bad}"
    return None


SLOT_NAMES = {q: slots(q) for q in sorted(EXAMPLES)}
SLOTS = [(q, name, where) for q, named in SLOT_NAMES.items() for name, where in named]


def _valid(qualified, where):
    ex = EXAMPLES[qualified]()
    return ex.args[where] if isinstance(where, int) else ex.kwargs[where]


@st.composite
def bad_calls(draw, slots=SLOTS):
    qualified, name, where = draw(st.sampled_from(slots))
    label, value = draw(bad_values(_valid(qualified, where)))
    return qualified, name, where, label, value


N_EXAMPLES = int(os.environ.get("SOFTLIN_PROPERTY_EXAMPLES", "300"))


@settings(
    max_examples=N_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)
@given(bad_calls())
def test_a_bad_argument_gets_a_clear_error_or_a_finite_result(case):
    qualified, name, where, label, value = case
    problem = run(qualified, name, where, value)
    assert problem is None, f"{qualified}({name}={label}): {problem}"


# --------------------------------------------------------------------------------------------------
# The table itself


def test_every_public_name_has_an_example():
    names = public_names()
    assert len(names) >= 70 and "softlin.attention.softmax_attention" in names
    missing = names - set(EXAMPLES) - set(NOT_CALLED)
    assert not missing, f"add a valid call to EXAMPLES for: {sorted(missing)}"
    for qualified in EXAMPLES:
        resolve(qualified)  # an entry whose name no longer exists fails here


@pytest.mark.parametrize("qualified", sorted(EXAMPLES))
def test_the_example_is_valid(qualified):
    """Each valid call runs and returns a finite result: the replacements start from a good call."""
    ex = EXAMPLES[qualified]()
    fn = resolve(qualified)
    if ex.receiver is not None:
        fn = getattr(ex.receiver(), qualified.rpartition(".")[2])
    result = fn(*ex.args, **ex.kwargs)
    if inspect.isgenerator(result):
        result = list(result)
    assert non_finite(result) is None


def test_planting_a_bug_makes_the_property_fail(monkeypatch):
    """Remove one validation (softlin.attention stops checking that V is a tensor): the property then
    finds the AttributeError from deep inside, as issue 33 reported it."""
    import softlin.attention as attention

    checked = attention.as_tensor_arg
    monkeypatch.setattr(
        attention,
        "as_tensor_arg",
        lambda name, x, **kw: x if name == "V" else checked(name, x, **kw),
    )
    targets = [s for s in SLOTS if s[0] == "softlin.attention.linear_attention" and s[1] == "V"]
    found = []

    @settings(max_examples=50, deadline=None, database=None)
    @given(bad_calls(targets))
    def prop(case):
        qualified, name, where, _, value = case
        found.append(run(qualified, name, where, value))

    prop()
    assert any(p and "AttributeError" in p for p in found), found


def sweep(slots=None):
    """Every argument of every example with the representative value of each category: a list of
    (call, problem or None)."""
    outcomes = []
    for qualified, name, where in SLOTS if slots is None else slots:
        for (label, value), _ in categories(_valid(qualified, where)):
            outcomes.append((f"{qualified}({name}={label})", run(qualified, name, where, value)))
    return outcomes


def test_every_argument_in_every_category():
    """The property on every (argument, category) pair once: the complete table of issue 33."""
    outcomes = sweep()
    bad = [f"{c}: {p}" for c, p in outcomes if p is not None]
    assert not bad, f"{len(bad)} of {len(outcomes)} calls misbehave:\n" + "\n".join(bad)
