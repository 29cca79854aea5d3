"""Validation once, at the boundary (issue 22): a public call checks each argument once, and the right-hand
side of a flow checks nothing. The counts are taken by wrapping softlin's validators where each module
imported them, and ``torch.linalg.eigvalsh``, the eigendecomposition of the covariance checks."""

from __future__ import annotations

import collections
import importlib
import pkgutil

import pytest
import softlin as sl
import torch
from softlin import _checks, experiment, icl
from softlin import stability as st

F64 = torch.float64
VALIDATORS = ("as_tensor_arg", "check_sigma", "check_psd", "check_weights", "check_measure")


@pytest.fixture
def counts(monkeypatch):
    """A Counter of (validator, argument name) calls, and of eigendecompositions under "eigvalsh"."""
    seen = collections.Counter()
    modules = [
        importlib.import_module(f"softlin.{m.name}") for m in pkgutil.iter_modules(sl.__path__)
    ]
    for name in VALIDATORS:
        original = getattr(_checks, name)

        def counted(*args, _name=name, _original=original, **kwargs):
            arg = next((a for a in args if isinstance(a, str)), kwargs.get("name", ""))
            seen[(_name, arg)] += 1
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
}


@pytest.mark.parametrize("call", PUBLIC_CALLS, ids=str)
def test_a_public_call_checks_each_argument_once(counts, call):
    PUBLIC_CALLS[call]()
    assert counts, "the validators were not seen: the counting is broken"
    twice = {f"{v}({a})": n for (v, a), n in counts.items() if n > 1 and v != "eigvalsh"}
    assert not twice, f"{call} checks an argument more than once: {twice}"
    # Sigma: one positive-definiteness check (risk_gap's GaussianMeasure of the inputs checks its own
    # covariance once more, when it is built: once per call, not per batch)
    limit = 2 if call == "risk_gap" else 1
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
