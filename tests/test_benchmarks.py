"""The reference implementations and the harness behind ``make bench`` and the Performance page
(``bench/benchmarks.py``, imported from the checkout: it is not part of the installed package).

The figures compare the library's fast paths with plain references, so the references must compute the
same thing: the naive softmax equals ``softmax_attention``, and the plain ``nn.Module`` training loop
has the same loss, gradients and SGD update as ``softlin.experiment.sgd_step`` (float64, to 1e-10). No test
here asserts a time.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import softlin as sl
import torch
from softlin import experiment, icl

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import benchmarks as bm

F64 = torch.float64
SIGMA = icl.kms_covariance(5, 0.5)


def test_naive_softmax_equals_the_library():
    tokens, queries, U, V = bm.attention_problem(5000, Q=3)
    torch.testing.assert_close(
        bm.naive_softmax_attention(tokens, queries, U, V),
        sl.softmax_attention(tokens, queries, U, V),
        rtol=1e-12,
        atol=1e-13,
    )


def test_attention_problem_shapes_and_dtype():
    tokens, queries, U, V = bm.attention_problem(10, D=4, Q=2, dtype=torch.float32)
    assert (tokens.shape, queries.shape, U.shape, V.shape) == ((10, 4), (2, 4), (4, 4), (1, 4))
    assert tokens.dtype == queries.dtype == torch.float32
    torch.testing.assert_close(bm.read_pass(tokens), tokens.sum(0))
    with pytest.raises(ValueError, match="L must be a positive integer"):
        bm.attention_problem(0)


def test_reference_module_has_the_full_models_predictions(gen):
    model = experiment.FullAttention.initialise(5, generator=gen, dtype=F64)
    p = icl.sample_prompts(SIGMA, 30, 8, tau2=0.2, noise_var=0.1, generator=gen)
    ref = bm.ReferenceAttention.from_full_attention(model)
    torch.testing.assert_close(
        ref(p.tokens, p.queries), model.predict(p.tokens, p.queries), rtol=1e-13, atol=1e-14
    )


@pytest.mark.parametrize("L", [1, 37, 1000])
def test_training_gradients_equal_the_reference_to_1e_10(gen, L):
    # float64 gradients of softlin's fused step (read off one SGD step with lr = 1) equal the autograd
    # gradients of the plain nn.Module loop to 1e-10 (both are rounding-level, ~1e-15).
    model = experiment.FullAttention.initialise(5, generator=gen, dtype=F64)
    ref = bm.ReferenceTraining(
        bm.ReferenceAttention.from_full_attention(model),
        SIGMA,
        L,
        16,
        lr=1e-3,
        tau2=0.2,
        noise_var=0.1,
    )
    tokens, queries, targets = ref.sample(gen)
    loss_ref, grads_ref = ref.loss_and_grad(tokens, queries, targets)
    batch = icl.RegressionPrompts(
        tokens, queries, targets, torch.zeros(16, 5, dtype=F64)
    )  # tasks unused
    stepped = model.clone()
    (loss,) = experiment.sgd_step([stepped], batch, 1.0)
    assert abs(float(loss) - float(loss_ref)) <= 1e-10 * max(1.0, abs(float(loss_ref)))
    for before, after, theirs in zip(model.parameters(), stepped.parameters(), grads_ref):
        assert float((before - after - theirs).abs().max()) <= 1e-10


def test_one_sgd_step_equals_the_reference_optimizer_step(gen):
    model = experiment.FullAttention.initialise(5, generator=gen, dtype=F64)
    ref = bm.ReferenceTraining(
        bm.ReferenceAttention.from_full_attention(model),
        SIGMA,
        200,
        32,
        lr=0.05,
        tau2=0.2,
        noise_var=0.1,
    )
    for _ in range(3):  # three steps on fresh batches, each batch fed to both
        tokens, queries, targets = ref.sample(gen)
        batch = icl.RegressionPrompts(tokens, queries, targets, torch.zeros(32, 5, dtype=F64))
        (loss,) = experiment.sgd_step([model], batch, 0.05)
        ref.optimizer.zero_grad()
        loss_ref = ref.loss_fn(ref.model(tokens, queries), targets)
        loss_ref.backward()
        ref.optimizer.step()
        assert float(loss) == pytest.approx(loss_ref.item(), rel=1e-12)
    m = ref.model
    for ours, theirs in zip(
        model.parameters(), (m.q.weight, m.k.weight, m.v.weight, m.o.weight[0])
    ):
        assert float((ours - theirs.detach()).abs().max()) <= 1e-10


def test_reference_batches_follow_the_experiments_data_model():
    # x ~ N(0, Sigma); y = w^T x + noise with w ~ N(0, tau2 I) and noise variance s2, so
    # Var(y) = tau2 tr(Sigma) + s2; the query's label slot is 0 and the target has the same law as y.
    gen = torch.Generator().manual_seed(2)
    tau2, s2, n = 0.2, 0.1, 4000
    ref = bm.ReferenceTraining(
        bm.ReferenceAttention(6, dtype=F64), SIGMA, 5, n, lr=1e-3, tau2=tau2, noise_var=s2
    )
    tokens, queries, targets = ref.sample(gen)
    assert tokens.shape == (n, 5, 6) and queries.shape == (n, 1, 6) and targets.shape == (n,)
    assert torch.all(queries[:, 0, 5] == 0)
    x = tokens[..., :5].reshape(-1, 5)
    cov = x.T @ x / x.shape[0]
    # entries of a sample covariance of 2e4 Gaussian vectors (correlated within a prompt only through
    # nothing: x is independent across tokens): standard error <= sqrt(2/2e4) = 0.01; allow 5 SE
    assert float((cov - SIGMA).abs().max()) < 0.05
    var_y = tau2 * float(torch.trace(SIGMA)) + s2  # = 1.1
    # variance of y over 2e4 labels of 4000 tasks: the task dominates the error; SE ~ var * sqrt(2/4000)
    assert abs(float(tokens[..., 5].var()) - var_y) < 5 * var_y * math.sqrt(2 / n)
    assert abs(float(targets.var()) - var_y) < 5 * var_y * math.sqrt(2 / n)


def test_compare_times_and_figures():
    calls = {"a": 0, "b": 0}

    def bump(k):
        calls[k] += 1

    times = bm.compare_times({"a": lambda: bump("a"), "b": lambda: bump("b")}, repeats=3, number=2)
    assert set(times) == {"a", "b"} and all(t >= 0 for t in times.values())
    assert calls == {"a": 7, "b": 7}  # one warm-up, then 3 rounds of 2
    with pytest.raises(TypeError, match="candidates"):
        bm.compare_times({})
    assert (
        bm.Figure("x", "speed 1.00x", ">= 0.75x", True).line()
        == "x: speed 1.00x (goal >= 0.75x) PASS"
    )
    assert bm.Figure("x", "speed 0.50x", ">= 0.75x", False).line().endswith("FAIL")
    assert bm.Figure("x", "note").line() == "x: note (information)"


def test_single_thread_restores_the_thread_count():
    before = torch.get_num_threads()
    with bm.single_thread(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def test_streaming_times_reports_every_candidate_and_small_errors():
    t = bm.streaming_times(20_000, repeats=1)
    assert {"read", "flat_read", "softmax", "unchunked", "naive"} <= set(t)
    assert t["max_abs_error"] < 1e-12 and t["naive_error"] < 1e-12  # float64 rounding
    t32 = bm.streaming_times(
        20_000, Q=4, dtype=torch.float32, repeats=1, naive=False, unchunked=False
    )
    assert "naive" not in t32 and t32["max_abs_error"] < 1e-5  # float32 rounding against float64


def test_extra_memory_is_bounded_when_streaming_and_grows_with_L_otherwise():
    # 1e6 float64 tokens (46 MiB): the unchunked pass holds the (L,) scores and weights (2 x 7.6 MiB);
    # the streamed call its chunk buffer (32768 scores, 0.25 MiB). Both first calls also page in ~2.5 MiB
    # of library code and buffers; a second call may reuse memory the allocator kept from the first.
    streamed = bm.extra_memory_mb(10**6)
    unchunked = bm.extra_memory_mb(10**6, chunk_size=10**6)
    assert streamed["tokens"] == pytest.approx(1e6 * 6 * 8 / 2**20)
    vector = (
        1e6 * 8 / 2**20
    )  # one (L,) float64 vector, 7.6 MiB: the unchunked pass holds two (scores,
    # weights); pages the allocator already holds can absorb part of one, so ask for more than 1.5
    assert streamed["first"] < 6 and streamed["repeat"] < 1 and unchunked["first"] > 1.5 * vector
    with pytest.raises(ValueError, match="which"):
        bm.extra_memory_mb(10, which="other")


def test_training_step_times_and_flow_time_run():
    t = bm.training_step_times(L=20, batch_size=4, steps=1, repeats=1, starts=3)
    assert set(t) == {
        "sampling",
        "one_start",
        "starts",
        "one_model",
        "plain",
        "reference",
        "reference_sampling",
        "one_start_fixed",
        "reference_fixed",
    }
    figs, step = bm.training_figures(
        dtypes=(torch.float32,), steps=1, repeats=1, L=20, batch_size=4, starts=3
    )
    assert len(figs) == 3 and figs[0].passed is not None and figs[2].passed is None and step
    f = bm.flow_time()
    assert f["distance"] <= 1e-8 and 0 < f["T"] <= 100  # the flow reaches 1e-8 (the grid located T)
