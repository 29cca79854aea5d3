"""Validation once, at the boundary (issue 22): a public call checks each argument once, and the right-hand
side of a flow checks nothing. The counts are taken by wrapping softlin's validators where each module
imported them, and ``torch.linalg.eigvalsh``, the eigendecomposition of the covariance checks."""

from __future__ import annotations

import collections
import importlib
import inspect
import math
import pkgutil
import re
import time

import pytest
import softlin as sl
import torch
from softlin import _checks, experiment, icl, measures, montecarlo
from softlin import concentration as cc
from softlin import stability as st

pytestmark = pytest.mark.unit  # the library's unit tests: `make check` runs them

F64 = torch.float64
VALIDATORS = {
    "as_tensor_arg": _checks,
    "check_sigma": _checks,
    "check_psd": _checks,
    "check_weights": _checks,
    "check_measure": measures,  # beside TokenMeasure, which _checks does not know
}


@pytest.fixture
def counts(monkeypatch):
    """A Counter of (validator, argument name) calls, and of eigendecompositions under "eigvalsh"."""
    seen = collections.Counter()
    modules = [
        importlib.import_module(f"softlin.{m.name}") for m in pkgutil.iter_modules(sl.__path__)
    ]
    for name, home in VALIDATORS.items():
        original = getattr(home, name)

        def counted(*args, _name=name, _original=original, **kwargs):
            bound = inspect.signature(_original).bind(*args, **kwargs)
            bound.apply_defaults()  # the argument's name, given or the validator's default
            default = "weights" if _name == "check_weights" else _name
            seen[(_name, bound.arguments.get("name", default))] += 1
            return _original(*args, **kwargs)

        for module in modules:
            if getattr(module, name, None) is original:
                monkeypatch.setattr(module, name, counted)
    eigvalsh = torch.linalg.eigvalsh

    def counted_eig(*args, **kwargs):
        seen[("eigvalsh", "")] += 1
        return eigvalsh(*args, **kwargs)

    monkeypatch.setattr(torch.linalg, "eigvalsh", counted_eig)
    return seen


def _attention_problem():
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randn(3, 50, 4, dtype=F64, generator=gen)
    queries = torch.randn(3, 2, 4, dtype=F64, generator=gen)
    return tokens, queries, 0.3 * torch.eye(4, dtype=F64), torch.eye(4, dtype=F64)


SIGMA = icl.kms_covariance(3, 0.5)
A, B = 0.3 * torch.eye(3, dtype=F64), torch.tensor(0.5, dtype=F64)
T, Q, U, V = _attention_problem()
GAUSS = sl.GaussianMeasure(torch.zeros(4, dtype=F64), torch.eye(4, dtype=F64))
X, XQ = torch.randn(5, 10, 3, dtype=F64), torch.randn(5, 3, dtype=F64)
PUBLIC_CALLS = {
    "softmax_attention": lambda: sl.softmax_attention(T, Q, U, V),
    "softmax_attention streamed": lambda: sl.softmax_attention(T, Q, U, V, chunk_size=8),
    "linear_attention": lambda: sl.linear_attention(T, Q, U, V),
    "softmax_weights": lambda: sl.softmax_weights(T, Q, U),
    "tilted_mean": lambda: sl.tilted_mean(T, Q),
    "tilted_moments": lambda: sl.tilted_moments(T, Q, chunk_size=10, second=True),
    "infinite_prompt_risk": lambda: icl.infinite_prompt_risk(A, B, SIGMA),
    "infinite_prompt_risk_grad": lambda: icl.infinite_prompt_risk_grad(A, B, SIGMA),
    "gap_terms": lambda: st.gap_terms(A, X, XQ, SIGMA),
    "EmpiricalRisk": lambda: st.EmpiricalRisk(SIGMA, X, XQ),
    "risk_gap": lambda: st.risk_gap(
        A, B, SIGMA, 10, n_prompts=100, generator=torch.Generator().manual_seed(1)
    ),
    "gaussian_attention_limit": lambda: sl.gaussian_attention_limit(
        Q, U, V, torch.zeros(3, 4, dtype=F64), torch.eye(4, dtype=F64).expand(3, 4, 4)
    ),
    "attention_limit": lambda: sl.attention_limit(GAUSS, Q[0], U, V),
    "linear_attention_limit": lambda: sl.linear_attention_limit(GAUSS, Q[0], U, V),
    "sample_errors": lambda: cc.sample_errors(
        GAUSS, Q[0], U, V, 20, 5, generator=torch.Generator().manual_seed(2), jacobians=True
    ),
    "linear_class_optimum": lambda: icl.linear_class_optimum(SIGMA, 10, released=True),
    "finite_prompt_risk": lambda: icl.finite_prompt_risk(
        A, B, SIGMA, 10, n_prompts=50, generator=torch.Generator().manual_seed(3)
    ),
    "risk_fluctuation_constant": lambda: icl.risk_fluctuation_constant(A, B, SIGMA),
}


def _parameters(call):
    """The parameter names of the public function a PUBLIC_CALLS entry calls."""
    target = call.split()[0]
    fn = next(getattr(m, target) for m in (sl, icl, st, cc) if hasattr(m, target))
    return set(inspect.signature(fn).parameters)


@pytest.mark.parametrize("call", PUBLIC_CALLS, ids=str)
def test_a_public_call_checks_each_argument_once(counts, call):
    PUBLIC_CALLS[call]()
    assert counts, "the validators were not seen: the counting is broken"
    # the call's own arguments (values the library computes may be checked where they enter a
    # public method, such as the tilt ``a`` of a measure's tilted_mean)
    names = _parameters(call)
    twice = {f"{v}({a})": n for (v, a), n in counts.items() if n > 1 and a in names}
    assert not twice, f"{call} checks an argument more than once: {twice}"
    # Sigma: one positive-definiteness check (risk_gap's GaussianMeasure of the inputs checks its own
    # covariance once more, when it is built: once per call, not per batch; the fluctuation constant
    # takes one eigendecomposition to decide whether it is finite)
    limit = 2 if call in ("risk_gap", "risk_fluctuation_constant") else 1
    assert counts[("eigvalsh", "")] <= limit, (
        f"{call}: {counts[('eigvalsh', '')]} eigendecompositions"
    )


def test_a_flow_checks_its_start_once_and_its_right_hand_side_never(counts):
    risk = st.EmpiricalRisk.draw(SIGMA, 10, 20, generator=torch.Generator().manual_seed(1))
    counts.clear()
    traj = risk.flow(A, B, [0.0, 0.5, 1.0])
    assert risk.last_nfev > 10 and len(traj.t) == 3
    calls = sum(counts.values())
    assert counts[("eigvalsh", "")] == 0, (
        f"{counts[('eigvalsh', '')]} eigendecompositions in a flow"
    )
    # the start (A0, b0): one check of each, whatever the number of solver steps
    assert calls <= 2, f"{calls} validator calls for {risk.last_nfev} right-hand sides: {counts}"


def test_the_infinite_prompt_flow_checks_nothing_per_step(counts):
    traj = icl.infinite_prompt_flow(A, B, SIGMA, [0.0, 1.0, 2.0])
    assert len(traj.t) == 3
    assert counts[("check_sigma", "")] + counts[("check_sigma", "Sigma")] <= 1, counts
    assert counts[("eigvalsh", "")] <= 1, counts


def test_a_dtype_mismatch_names_the_models_parameters():
    model = experiment.FullAttention.initialise(
        2, generator=torch.Generator().manual_seed(0)
    )  # float32
    tokens, queries = torch.zeros(4, 5, 3, dtype=F64), torch.zeros(4, 1, 3, dtype=F64)
    with pytest.raises(ValueError, match=r"the model's Q has dtype torch\.float32") as err:
        model.predict(tokens, queries)
    assert "weights" not in str(err.value), err.value


# --------------------------------------------------------------------------------------------------
# Issue 33's examples, one test per category: each now gets a clear error naming its argument.

MU = sl.GaussianMeasure(torch.zeros(2, dtype=F64), torch.eye(2, dtype=F64))
I2 = torch.eye(2, dtype=F64)
NONE_OR_STRING = {
    "softmax_attention V=None": (lambda: sl.softmax_attention(T, Q, U, None), "V"),
    "linear_attention V=None": (lambda: sl.linear_attention(T, Q, U, None), "V"),
    "attention_limit measure=None": (lambda: sl.attention_limit(None, Q[0], U, V), "measure"),
    "infinite_prompt_flow Sigma=None": (
        lambda: icl.infinite_prompt_flow(A, B, None, [0, 1]),
        "Sigma",
    ),
    "fixed_query_mse_expansion queries=None": (
        lambda: cc.fixed_query_mse_expansion(None, I2, I2, I2),
        "queries",
    ),
    "infinite_prompt_risk Sigma=None": (lambda: icl.infinite_prompt_risk(A, B, None), "Sigma"),
    "infinite_prompt_risk_grad Sigma=None": (
        lambda: icl.infinite_prompt_risk_grad(A, B, None),
        "Sigma",
    ),
    "risk_fluctuation_constant Sigma=None": (
        lambda: icl.risk_fluctuation_constant(A, B, None),
        "Sigma",
    ),
    "mean_and_stderr 'abc'": (lambda: montecarlo.mean_and_stderr("abc"), "samples"),
    "fit_power_law 'abc'": (lambda: montecarlo.fit_power_law("abc", [1.0, 2.0, 3.0]), "L_values"),
    "gronwall_envelope 'abc'": (lambda: st.gronwall_envelope([0.0, 1.0], "abc", 1.0), "g"),
    "heuristic_rate_exponent 'abc'": (lambda: cc.heuristic_rate_exponent("abc"), "u"),
    "infinite_prompt_flow t_eval='abc'": (
        lambda: icl.infinite_prompt_flow(A, B, SIGMA, "abc"),
        "t_eval",
    ),
}


@pytest.mark.parametrize("case", NONE_OR_STRING, ids=str)
def test_none_or_a_string_is_a_type_error_naming_the_argument(case):
    bad_call, name = NONE_OR_STRING[case]
    with pytest.raises(TypeError) as info:
        bad_call()
    assert re.search(rf"\b{name}\b", str(info.value)), info.value


def test_the_error_blames_the_argument_that_is_wrong():
    q, M = torch.zeros(2, 4, dtype=F64), torch.eye(3, dtype=F64)  # queries one column too wide
    with pytest.raises(ValueError, match=r"^queries must have last dimension D = 3") as info:
        sl.gaussian_attention_limit(q, M, M, torch.zeros(3, dtype=F64), M)
    assert "U must" not in str(info.value)
    with pytest.raises(ValueError, match=r"^tokens must have last dimension D = 3"):
        sl.softmax_attention(torch.zeros(3, 5, 4, dtype=F64), Q[..., :3], M, M)


@pytest.mark.parametrize(
    "A_bad", [-torch.eye(3, dtype=F64), torch.triu(torch.ones(3, 3, dtype=F64))], ids=["-I", "asym"]
)
def test_an_infinite_fluctuation_constant_is_said_so(A_bad):
    # Sigma^-1 - 2 A^T Sigma A is not positive definite: the average over queries diverges
    with pytest.raises(ValueError, match="the fluctuation constant is infinite at this A"):
        icl.risk_fluctuation_constant(A_bad, B, SIGMA)
    assert icl.risk_fluctuation_constant(A_bad, B, SIGMA, allow_infinite=True) == math.inf
    assert math.isfinite(icl.risk_fluctuation_constant(0.1 * A_bad, B, SIGMA))  # finite below


HUGE = 10**13
TYPOS = {
    "sample_errors L": (lambda: cc.sample_errors(MU, I2, I2, I2, HUGE, 4, generator=gen()), "L"),
    "sample_errors n_prompts": (
        lambda: cc.sample_errors(MU, I2, I2, I2, 10, HUGE, generator=gen()),
        "n_prompts",
    ),
    "prompt_batches L": (lambda: montecarlo.prompt_batches(MU, HUGE, 4, generator=gen()), "L"),
    "prompt_batches n_prompts": (
        lambda: montecarlo.prompt_batches(MU, 10, HUGE, generator=gen()),
        "n_prompts",
    ),
    "sample_prompts L": (lambda: icl.sample_prompts(SIGMA, HUGE, 4, generator=gen()), "L"),
    "sample_prompts batch_size": (
        lambda: icl.sample_prompts(SIGMA, 10, HUGE, generator=gen()),
        "batch_size",
    ),
    "finite_prompt_risk L": (
        lambda: icl.finite_prompt_risk(A, B, SIGMA, HUGE, n_prompts=10, generator=gen()),
        "L",
    ),
    "finite_prompt_risk n_prompts": (
        lambda: icl.finite_prompt_risk(A, B, SIGMA, 10, n_prompts=HUGE, generator=gen()),
        "n_prompts",
    ),
    "risk_gap L": (lambda: st.risk_gap(A, B, SIGMA, HUGE, n_prompts=10, generator=gen()), "L"),
    "risk_gap n_prompts": (
        lambda: st.risk_gap(A, B, SIGMA, 10, n_prompts=HUGE, generator=gen()),
        "n_prompts",
    ),
    "kms_covariance d": (lambda: icl.kms_covariance(HUGE, 0.5), "d"),
    "balanced_initialisation d": (lambda: icl.balanced_initialisation(HUGE, 0.3), "d"),
    "measure.sample n": (lambda: MU.sample(HUGE, generator=gen()), "n"),
}


def gen():
    return torch.Generator().manual_seed(0)


@pytest.mark.parametrize("case", TYPOS, ids=str)
def test_a_typo_in_a_size_fails_at_once(case):
    """A size of 10^13 is refused before anything is allocated or drawn: the error names the argument
    and gives the estimate (memory or draws) and the limit."""
    bad_call, name = TYPOS[case]
    start = time.process_time()
    with pytest.raises(ValueError) as info:
        bad_call()
    assert time.process_time() - start < 1.0
    message = str(info.value)
    assert re.search(rf"\b{name} = {HUGE}\b", message), message
    assert re.search(r"more than the .* (of this machine|one call draws)", message), message


def test_a_long_loop_shows_progress_and_a_short_one_does_not(monkeypatch):
    from softlin._progress import RATE, SECONDS, progress

    monkeypatch.delenv("SOFTLIN_PROGRESS", raising=False)
    steps = range(3)
    assert progress(steps, work=RATE) is steps  # about a second: no bar
    bar = progress(steps, work=2 * RATE * SECONDS)
    assert type(bar).__name__ == "tqdm" or "tqdm" in type(bar).__module__
    assert list(bar) == [0, 1, 2]
    monkeypatch.setenv("SOFTLIN_PROGRESS", "0")
    assert progress(steps, work=1e30) is steps  # the book's build: never
