"""Finite-prompt softmax and linear attention: definitions, streaming, numerical safety, invariances,
gradients and input validation."""

from __future__ import annotations

import math

import pytest
import softlin as sl
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.unit  # the library's unit tests: `make check` runs them

F64 = torch.float64


def _problem(gen, *, batch=(), L=37, Q=3, D=4, D_out=2, dtype=F64, scale=0.5):
    tokens = torch.randn(*batch, L, D, generator=gen, dtype=dtype)
    queries = torch.randn(*batch, Q, D, generator=gen, dtype=dtype)
    U = scale * torch.randn(D, D, generator=gen, dtype=dtype)
    V = torch.randn(D_out, D, generator=gen, dtype=dtype)
    return tokens, queries, U, V


def _reference(tokens, queries, U, V, weights=None):
    """Plain definition, one query and one token at a time (float64)."""
    out = torch.empty(*queries.shape[:-1], V.shape[0], dtype=F64)
    flat_t = tokens.reshape(-1, *tokens.shape[-2:]).double()
    flat_q = queries.reshape(-1, *queries.shape[-2:]).double()
    flat_w = None if weights is None else weights.reshape(-1, weights.shape[-1]).double()
    flat_o = out.reshape(-1, *out.shape[-2:])
    for b in range(flat_t.shape[0]):
        for q in range(flat_q.shape[1]):
            s = torch.stack(
                [flat_t[b, i] @ U.double() @ flat_q[b, q] for i in range(flat_t.shape[1])]
            )
            w = torch.ones_like(s) if flat_w is None else flat_w[b]
            p = w * torch.exp(s - s.max())
            p = p / p.sum()
            flat_o[b, q] = V.double() @ (p[:, None] * flat_t[b]).sum(0)
    return out


def test_softmax_attention_matches_the_definition(gen):
    tokens, queries, U, V = _problem(gen, batch=(2,), L=11)
    w = torch.rand(2, 11, generator=gen, dtype=F64)
    torch.testing.assert_close(
        sl.softmax_attention(tokens, queries, U, V),
        _reference(tokens, queries, U, V),
        rtol=1e-12,
        atol=1e-12,
    )
    torch.testing.assert_close(
        sl.softmax_attention(tokens, queries, U, V, weights=w),
        _reference(tokens, queries, U, V, w),
        rtol=1e-12,
        atol=1e-12,
    )


def test_output_shape_with_several_batch_dimensions(gen):
    tokens, queries, U, V = _problem(gen, batch=(2, 3), L=5, Q=4, D=3, D_out=7)
    assert sl.softmax_attention(tokens, queries, U, V).shape == (2, 3, 4, 7)
    assert sl.linear_attention(tokens, queries, U, V).shape == (2, 3, 4, 7)
    assert sl.softmax_weights(tokens, queries, U).shape == (2, 3, 4, 5)


@pytest.mark.parametrize(
    "chunk_size", [1, 7, 13, 97, 1000]
)  # 1, primes that do / do not divide L, L, > L
def test_chunked_equals_unchunked(gen, chunk_size):
    tokens, queries, U, V = _problem(gen, batch=(2,), L=91, scale=2.0)
    w = torch.rand(2, 91, generator=gen, dtype=F64)
    w[:, :20] = 0.0  # zero weights at the start: the running max starts at -inf
    for weights in (None, w):
        full = sl.softmax_attention(tokens, queries, U, V, weights=weights)
        chunked = sl.softmax_attention(
            tokens, queries, U, V, weights=weights, chunk_size=chunk_size
        )
        torch.testing.assert_close(
            chunked, full, rtol=1e-12, atol=1e-13
        )  # same sums, reordered: rounding only


def test_chunk_equal_to_L():
    gen = torch.Generator().manual_seed(3)
    tokens, queries, U, V = _problem(gen, L=91)
    torch.testing.assert_close(
        sl.softmax_attention(tokens, queries, U, V, chunk_size=91),
        sl.softmax_attention(tokens, queries, U, V),
        rtol=0,
        atol=0,
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("chunk_size", [None, 4])
def test_huge_scores_are_finite_and_exact(dtype, chunk_size):
    # Scores z_i^T U z of magnitude ~1e4: exp overflows without the max shift. The softmax is then a
    # point mass on the largest score, so the output is exactly V z_argmax.
    tokens = torch.tensor(
        [[1.0, 0.0], [0.0, 1.0], [-1.0, 0.5], [0.9, 0.1], [0.2, -0.3]], dtype=dtype
    )
    U = torch.eye(2, dtype=dtype)
    V = torch.tensor([[1.0, 2.0]], dtype=dtype)
    queries = torch.tensor([[1e4, 0.0], [-1e4, 1e4], [0.0, -1e4]], dtype=dtype)
    out = sl.softmax_attention(tokens, queries, U, V, chunk_size=chunk_size)
    assert torch.isfinite(out).all()
    expected = torch.stack([V @ tokens[0], V @ tokens[2], V @ tokens[4]])
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    # Two tokens tied at the top score share the mass equally, still exactly.
    tied = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]], dtype=dtype)
    out = sl.softmax_attention(
        tied, torch.tensor([[1e4, 0.0]], dtype=dtype), U, V, chunk_size=chunk_size
    )
    torch.testing.assert_close(out, (V @ tied[0])[None], rtol=0, atol=0)


def test_float32_agrees_with_float64_at_large_scores(gen):
    tokens, queries, U, V = _problem(gen, L=500, scale=50.0)  # scores of order 1e2-1e3
    ref = sl.softmax_attention(tokens, queries, U, V)
    out = sl.softmax_attention(tokens.float(), queries.float(), U.float(), V.float(), chunk_size=64)
    torch.testing.assert_close(
        out.double(), ref, rtol=1e-4, atol=1e-4
    )  # float32 rounding of O(1e3) scores


@settings(max_examples=40, deadline=None)
@given(
    L=st.integers(1, 30), seed=st.integers(0, 2**31 - 1), fn=st.sampled_from(["softmax", "linear"])
)
def test_permutation_invariance(L, seed, fn):
    g = torch.Generator().manual_seed(seed)
    tokens, queries, U, V = _problem(g, L=L, scale=1.0)
    perm = torch.randperm(L, generator=g)
    f = sl.softmax_attention if fn == "softmax" else sl.linear_attention
    torch.testing.assert_close(
        f(tokens[perm], queries, U, V), f(tokens, queries, U, V), rtol=1e-11, atol=1e-12
    )


@settings(max_examples=40, deadline=None)
@given(
    counts=st.lists(st.integers(0, 4), min_size=1, max_size=12).filter(lambda c: sum(c) > 0),
    seed=st.integers(0, 2**31 - 1),
    fn=st.sampled_from(["softmax", "linear"]),
)
def test_integer_weights_equal_duplicated_tokens(counts, seed, fn):
    g = torch.Generator().manual_seed(seed)
    tokens, queries, U, V = _problem(g, L=len(counts), scale=1.0)
    w = torch.tensor(counts, dtype=F64)
    duplicated = tokens.repeat_interleave(torch.tensor(counts), dim=0)
    f = sl.softmax_attention if fn == "softmax" else sl.linear_attention
    torch.testing.assert_close(
        f(tokens, queries, U, V, weights=w), f(duplicated, queries, U, V), rtol=1e-11, atol=1e-12
    )


def test_linear_attention_matches_definition(gen):
    tokens, queries, U, V = _problem(gen, L=9)
    expected = torch.stack(
        [sum((tokens[i] @ U @ q) * (V @ tokens[i]) for i in range(9)) / 9 for q in queries]
    )
    torch.testing.assert_close(
        sl.linear_attention(tokens, queries, U, V), expected, rtol=1e-12, atol=1e-12
    )


def test_softmax_weights_sum_to_one_and_match_attention(gen):
    tokens, queries, U, V = _problem(gen, batch=(3,), L=17)
    p = sl.softmax_weights(tokens, queries, U)
    torch.testing.assert_close(p.sum(-1), torch.ones(3, 3, dtype=F64))
    torch.testing.assert_close((p @ tokens) @ V.mT, sl.softmax_attention(tokens, queries, U, V))


@pytest.mark.parametrize("chunk_size", [None, 5])
def test_gradients_match_finite_differences(chunk_size):
    g = torch.Generator().manual_seed(7)
    tokens, queries, U, V = _problem(g, L=12, Q=2, D=3)
    w = torch.rand(12, generator=g, dtype=F64) + 0.1
    args = [t.clone().requires_grad_(True) for t in (tokens, queries, U, V, w)]
    assert torch.autograd.gradcheck(
        lambda t, q, u, v, ww: sl.softmax_attention(t, q, u, v, weights=ww, chunk_size=chunk_size),
        args,
    )
    assert torch.autograd.gradcheck(
        lambda t, q, u, v, ww: sl.linear_attention(t, q, u, v, weights=ww), args
    )


# ---------------------------------------------------------------------------------------------- errors
def _good():
    g = torch.Generator().manual_seed(0)
    return _problem(g, L=6, Q=2, D=3)


@pytest.mark.parametrize("fn", [sl.softmax_attention, sl.linear_attention])
@pytest.mark.parametrize(
    "mutate, exc, needle",
    [
        (
            lambda a: a.update(tokens=a["tokens"].tolist()),
            TypeError,
            "tokens must be a torch.Tensor",
        ),
        (lambda a: a.update(U=a["U"].to(torch.int64)), TypeError, "U must be a floating-point"),
        (
            lambda a: a.update(queries=a["queries"][:, :2]),
            ValueError,
            "queries must have last dimension D = 3",
        ),
        (lambda a: a.update(U=a["U"][:, :2]), ValueError, "U must be a square matrix"),
        (lambda a: a.update(U=torch.eye(4, dtype=F64)), ValueError, "U must have shape (3, 3)"),
        (lambda a: a.update(V=a["V"][:, :2]), ValueError, "V must have shape (any, 3)"),
        (lambda a: a.update(tokens=a["tokens"][:0]), ValueError, "at least one token"),
        (
            lambda a: a.update(weights=-torch.ones(6, dtype=F64)),
            ValueError,
            "weights must be non-negative",
        ),
        (lambda a: a.update(weights=torch.zeros(6, dtype=F64)), ValueError, "all zero"),
        (
            lambda a: a.update(weights=torch.ones(5, dtype=F64)),
            ValueError,
            "weights must have shape (6,)",
        ),
        (
            lambda a: a["tokens"].__setitem__((0, 0), float("nan")),
            ValueError,
            "tokens must be finite, got 1 NaN",
        ),
        (
            lambda a: a["queries"].__setitem__((0, 0), float("inf")),
            ValueError,
            "queries must be finite",
        ),
        (lambda a: a["weights"].__setitem__(0, float("nan")), ValueError, "weights must be finite"),
        (
            lambda a: a.update(queries=a["queries"].expand(2, 2, 3)),
            ValueError,
            "leading (batch) dimensions",
        ),
        (lambda a: a.update(V=a["V"].float()), ValueError, "V has dtype torch.float32"),
    ],
)
def test_bad_input_is_rejected_with_a_clear_message(fn, mutate, exc, needle):
    tokens, queries, U, V = _good()
    args = dict(tokens=tokens, queries=queries, U=U, V=V, weights=torch.ones(6, dtype=F64))
    mutate(args)
    with pytest.raises(exc) as info:
        fn(args["tokens"], args["queries"], args["U"], args["V"], weights=args["weights"])
    assert needle in str(info.value)


@pytest.mark.parametrize(
    "bad, exc", [(0, ValueError), (-3, ValueError), (2.5, TypeError), (True, TypeError)]
)
def test_bad_chunk_size(bad, exc):
    tokens, queries, U, V = _good()
    with pytest.raises(exc, match="chunk_size must be a positive integer"):
        sl.softmax_attention(tokens, queries, U, V, chunk_size=bad)


def test_no_silent_broadcast_of_batched_queries_against_unbatched_tokens():
    tokens, queries, U, V = _good()
    with pytest.raises(ValueError, match="leading"):
        sl.softmax_attention(tokens, queries.expand(4, 2, 3), U, V)
    assert math.isfinite(float(sl.softmax_attention(tokens, queries, U, V).sum()))


@pytest.mark.parametrize("chunk_size", [None, 2])
def test_non_finite_token_is_reported_even_with_zero_weight(chunk_size):
    # Tokens are checked through the result (no extra pass); a bad token must still be named.
    tokens, queries, U, V = _good()
    tokens[3, 1] = float("inf")
    w = torch.ones(6, dtype=F64)
    w[3] = 0.0
    for fn in (sl.softmax_attention, sl.linear_attention):
        kwargs = {"chunk_size": chunk_size} if fn is sl.softmax_attention else {}
        with pytest.raises(ValueError, match="tokens must be finite, got 0 NaN and 1 inf"):
            fn(tokens, queries, U, V, weights=w, **kwargs)


def test_overflowing_scores_raise_instead_of_returning_inf():
    tokens = torch.tensor([[1e200, 0.0], [0.0, 1.0]], dtype=F64)
    queries = torch.tensor([[1e200, 0.0]], dtype=F64)
    with pytest.raises(ValueError, match="overflowed"):
        sl.softmax_attention(tokens, queries, torch.eye(2, dtype=F64), torch.eye(2, dtype=F64))


# ---------------------------------------------------------------------- fast paths equal the plain ones
# The default call streams long prompts in cache-sized chunks, with one shift (no gradients) or a shift
# per chunk (autograd, torch.func, or where one shift would overflow). Each fast
# path must give the plain result: values and gradients, with and without weights and batch dimensions.


def _naive(tokens, queries, U, V, weights=None):
    """Materialised softmax in float64 without tricks (differentiable, for gradients)."""
    s = queries @ U.mT @ tokens.mT  # (..., Q, L)
    if weights is not None:
        s = s + torch.log(weights).unsqueeze(-2)
    return torch.softmax(s, -1) @ tokens @ V.mT


def test_auto_chunk_size_fits_the_cache_and_leaves_short_prompts_unchunked():
    from softlin._fast import CACHE_BYTES, MIN_CHUNK, auto_chunk_size

    assert auto_chunk_size(torch.empty(1000, 6, dtype=F64), 1) is None  # fits: one pass
    per_token = 7 * 8  # D + Q numbers of 8 bytes
    c = auto_chunk_size(torch.empty(10**6, 6, dtype=F64), 1)
    assert c * per_token <= CACHE_BYTES < 2 * c * per_token  # the largest power of two that fits
    assert auto_chunk_size(torch.empty(10**6, 6, dtype=torch.float32), 1) == 2 * c
    c = auto_chunk_size(torch.empty(4, 10**6, 6, dtype=F64), 64)
    assert c == MIN_CHUNK or c * 4 * 70 * 8 <= CACHE_BYTES  # never below the minimum chunk


@pytest.mark.parametrize("dtype", [F64, torch.float32])
@pytest.mark.parametrize("Q", [1, 3])
@pytest.mark.parametrize("weighted", [False, True])
def test_default_streaming_equals_unchunked_and_naive(dtype, Q, weighted):
    # L = 140 001 tokens is longer than the automatic chunk (3 chunks in float64 with Q = 1, a short last
    # chunk), so the default call streams.
    gen = torch.Generator().manual_seed(11)
    L = 140_001
    tokens, queries, U, V = _problem(gen, L=L, Q=Q, D=6, D_out=2, dtype=dtype, scale=0.3)
    w = torch.rand(L, generator=gen, dtype=dtype) if weighted else None
    if weighted:
        w[:80_000] = 0.0  # the first chunk carries no weight: its maximum is -inf
    out = sl.softmax_attention(tokens, queries, U, V, weights=w)
    full = sl.softmax_attention(tokens, queries, U, V, weights=w, chunk_size=L)
    ref = _naive(*(x.double() for x in (tokens, queries, U, V)), None if w is None else w.double())
    if dtype == F64:
        # same sums in another order: rounding of O(1) outputs over 7e4 terms
        torch.testing.assert_close(out, full, rtol=1e-12, atol=1e-13)
        torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-13)
    else:
        # float32: rounding of sums of up to 1.4e5 terms; the random-walk size sqrt(L) eps max|z| is about
        # 374 * 6e-8 * 4 = 9e-5, times a few for BLAS's sequential accumulation of positive weights
        torch.testing.assert_close(out.double(), ref, rtol=0, atol=5e-4)
        torch.testing.assert_close(full.double(), ref, rtol=0, atol=5e-4)


@pytest.mark.parametrize("chunk_size", [8, 16, 24, 64])
def test_float32_streaming_equals_plain_products(chunk_size):
    gen = torch.Generator().manual_seed(5)
    tokens, queries, U, V = _problem(
        gen, batch=(2,), L=203, Q=1, D=6, dtype=torch.float32, scale=1.0
    )
    out = sl.softmax_attention(tokens, queries, U, V, chunk_size=chunk_size)
    ref = _naive(*(x.double() for x in (tokens, queries, U, V)))
    torch.testing.assert_close(
        out.double(), ref, rtol=0, atol=1e-5
    )  # float32 rounding of O(1) sums


def test_float32_streaming_still_reports_a_non_finite_token():
    tokens = torch.randn(64, 6, generator=torch.Generator().manual_seed(0))
    tokens[13, 2] = float("inf")
    q, U, V = torch.ones(1, 6), 0.1 * torch.eye(6), torch.ones(1, 6)
    for chunk_size in (None, 16):
        with pytest.raises(ValueError, match="tokens must be finite, got 0 NaN and 1 inf"):
            sl.softmax_attention(tokens, q, U, V, chunk_size=chunk_size)


@pytest.mark.parametrize("dtype", [F64, torch.float32])
@pytest.mark.parametrize("chunk_size", [None, 7, 16])
def test_streaming_gradients_equal_naive_autograd(dtype, chunk_size):
    # Gradients of a scalar function of the output with respect to every input, through the streamed
    # loop (fresh intermediates under autograd), equal those of the naive materialised softmax.
    gen = torch.Generator().manual_seed(9)
    tokens, queries, U, V = _problem(
        gen, batch=(2,), L=96, Q=1 if dtype == torch.float32 else 2, D=6, dtype=dtype
    )
    w = torch.rand(2, 96, generator=gen, dtype=dtype) + 0.1
    proj = torch.randn(queries.shape[-2], V.shape[0], generator=gen, dtype=dtype)

    def grads(fn, cast):
        args = [x.detach().to(cast).requires_grad_(True) for x in (tokens, queries, U, V, w)]
        (fn(*args) * proj.to(cast)).sum().backward()
        return [a.grad for a in args]

    ours = grads(
        lambda t, q, u, v, ww: sl.softmax_attention(t, q, u, v, weights=ww, chunk_size=chunk_size),
        dtype,
    )
    ref = grads(_naive, F64)
    tol = 1e-12 if dtype == F64 else 2e-5  # float64 rounding; float32 rounding of O(1) sums
    for a, b in zip(ours, ref):
        torch.testing.assert_close(a.double(), b, rtol=tol, atol=tol)


def test_streaming_works_under_torch_func_transforms():
    # torch.func.grad and jacrev wrap the inputs; the streamed loop then takes the online pass.
    # (vmap is not supported: the input checks branch on values.)
    gen = torch.Generator().manual_seed(4)
    tokens, queries, U, V = _problem(gen, L=50, Q=1, D=4, D_out=2)
    ours = torch.func.grad(
        lambda U_: sl.softmax_attention(tokens, queries, U_, V, chunk_size=8).sum()
    )(U)
    ref = torch.func.grad(lambda U_: _naive(tokens, queries, U_, V).sum())(U)
    torch.testing.assert_close(ours, ref, rtol=1e-12, atol=1e-13)  # float64 rounding
    jac = torch.func.jacrev(lambda V_: sl.softmax_attention(tokens, queries, U, V_, chunk_size=8))(
        V
    )
    torch.testing.assert_close(
        jac, torch.func.jacrev(lambda V_: _naive(tokens, queries, U, V_))(V), rtol=1e-12, atol=1e-13
    )


def test_one_shift_and_online_passes_agree(gen):
    # Without gradients the kernel shifts every chunk by the first chunk's maximum, in base 2; under
    # autograd each chunk by its own maximum. Same sums, other shifts: float64 rounding of O(1) outputs.
    tokens, queries, U, V = _problem(gen, batch=(2,), L=100, Q=2, D=5, scale=2.0)
    w = torch.rand(2, 100, generator=gen, dtype=F64)
    for weights in (None, w):
        plain = sl.softmax_attention(tokens, queries, U, V, weights=weights, chunk_size=16)
        tracked = sl.softmax_attention(
            tokens, queries, U.clone().requires_grad_(True), V, weights=weights, chunk_size=16
        )
        torch.testing.assert_close(tracked.detach(), plain, rtol=1e-13, atol=1e-14)


def test_the_online_path_is_tilted_sums(gen, monkeypatch):
    # One online softmax in softlin: the fast kernel's differentiable (and overflow) path is TiltedSums.
    tokens, queries, U, V = _problem(gen, batch=(2,), L=100, Q=2, D=5, scale=2.0)
    calls = []
    update = sl.TiltedSums._update
    monkeypatch.setattr(
        sl.TiltedSums, "_update", lambda self, *a: calls.append(1) or update(self, *a)
    )
    U = U.clone().requires_grad_(True)
    sl.softmax_attention(tokens, queries, U, V, chunk_size=16)
    assert len(calls) == 7, f"{len(calls)} TiltedSums updates for 100 tokens in chunks of 16"


def test_one_shift_pass_gives_up_where_it_would_overflow():
    from softlin._fast import _one_shift_pass

    # The second chunk scores 800 above the first one's maximum (e^800 overflows float64): the one-shift
    # pass returns None, and the default call still gives the exact point mass of the online pass.
    tokens = torch.zeros(8, 2, dtype=F64)
    tokens[5] = torch.tensor([800.0, 1.0], dtype=F64)
    a = torch.tensor([[1.0, 0.0]], dtype=F64)
    assert _one_shift_pass(tokens, a, None, 4) is None
    out = sl.softmax_attention(
        tokens, a, torch.eye(2, dtype=F64), torch.eye(2, dtype=F64), chunk_size=4
    )
    torch.testing.assert_close(out, tokens[5:6], rtol=0, atol=0)
    weights = torch.ones(8, dtype=F64)
    weights[:4] = 0.0  # the first chunk carries no weight: no shift to take
    assert _one_shift_pass(tokens * 0.01, a, weights, 4) is None
    assert _one_shift_pass(tokens * 0.01, a, None, 4) is not None  # finite and safe: kept


# ------------------------------------------------------------- the plain definition and its online form
def test_softmax_attention_is_V_times_the_tilted_mean(gen):
    tokens, queries, U, V = _problem(gen, batch=(2,), L=40)
    m = sl.tilted_mean(tokens, queries @ U.mT)
    torch.testing.assert_close(m @ V.mT, _reference(tokens, queries, U, V), rtol=1e-12, atol=1e-12)
    lin = sl.linear_mean(tokens, queries @ U.mT) @ V.mT
    torch.testing.assert_close(lin, sl.linear_attention(tokens, queries, U, V), rtol=0, atol=0)


def _reference_moments(tokens, a, weights=None):
    """Weights, mean, second moment, ESS and max weight one direction at a time (float64)."""
    w = torch.ones(tokens.shape[-2], dtype=F64) if weights is None else weights.double()
    out = []
    for q in range(a.shape[-2]):
        s = tokens.double() @ a[q].double()
        p = w * torch.exp(s - s.max())
        p = p / p.sum()
        zz = tokens.double()[:, :, None] * tokens.double()[:, None, :]
        out.append(
            (p @ tokens.double(), torch.einsum("i,ijk->jk", p, zz), 1 / (p**2).sum(), p.max())
        )
    return [torch.stack(x) for x in zip(*out)]


@pytest.mark.parametrize("chunk_size", [None, 1, 5, 16, 64])
@pytest.mark.parametrize("weighted", [False, True])
def test_tilted_moments_match_the_definition_for_any_chunking(gen, chunk_size, weighted):
    tokens = torch.randn(37, 3, generator=gen, dtype=F64)
    a = 1.5 * torch.randn(4, 3, generator=gen, dtype=F64)
    w = torch.rand(37, generator=gen, dtype=F64) if weighted else None
    if weighted:
        w[:10] = 0.0  # chunks without weight at the start: their maximum is -inf
    got = sl.tilted_moments(tokens, a, weights=w, second=True, chunk_size=chunk_size)
    mean, second, ess, wmax = _reference_moments(tokens, a, w)
    for x, y in ((got.mean, mean), (got.second, second), (got.ess, ess), (got.max_weight, wmax)):
        torch.testing.assert_close(x, y, rtol=1e-12, atol=1e-12)  # the same sums, reordered
    torch.testing.assert_close(
        got.mean, sl.tilted_mean(tokens, a, weights=w), rtol=1e-12, atol=1e-13
    )
    cov = second - mean[:, :, None] * mean[:, None, :]
    torch.testing.assert_close(got.covariance, cov, rtol=1e-10, atol=1e-12)


def test_tilted_sums_over_a_stream_of_batched_chunks(gen):
    # Prompts drawn chunk by chunk (a stream), with directions shared by all prompts through expand.
    a = torch.randn(1, 3, 2, generator=gen, dtype=F64).expand(5, 3, 2)
    chunks = [torch.randn(5, c, 2, generator=gen, dtype=F64) for c in (4, 9, 1, 30)]
    sums = sl.TiltedSums(a, second=True)
    for c in chunks:
        sums.update(c)
    whole = sl.tilted_moments(torch.cat(chunks, dim=1), a, second=True)
    got = sums.moments()
    assert sums.n_tokens == 44
    for x, y in zip(got, whole):
        torch.testing.assert_close(x, y, rtol=1e-12, atol=1e-13)


def test_tilted_moments_are_differentiable(gen):
    tokens = torch.randn(20, 3, generator=gen, dtype=F64)
    a = torch.randn(2, 3, generator=gen, dtype=F64, requires_grad=True)

    def f(a_):
        m = sl.tilted_moments(tokens, a_, second=True, chunk_size=6)
        return m.mean.sum() + m.covariance.sum() + m.ess.sum()

    assert torch.autograd.gradcheck(f, (a,))


def test_tilted_sums_errors():
    a = torch.zeros(2, 3, dtype=F64)
    with pytest.raises(ValueError, match="no tokens yet"):
        sl.TiltedSums(a).moments()
    with pytest.raises(ValueError, match="a must have last dimension D = 4"):
        sl.TiltedSums(a).update(torch.zeros(5, 4, dtype=F64))
    with pytest.raises(ValueError, match="second moments were not accumulated"):
        _ = sl.tilted_moments(torch.zeros(5, 3, dtype=F64), a).covariance
    with pytest.raises(ValueError, match="leading"):
        sl.tilted_mean(torch.zeros(4, 5, 3, dtype=F64), a)
