"""The benchmark harness of the book: reference implementations, timing, and the figures of ``make bench``
and of the Performance page (``book/performance.md``).

This lives in the checkout, not in the installed ``softlin`` package: ``bench/run.py`` and the Performance
page import it from here (the page finds the checkout from ``softlin.__file__`` or the environment variable
``SOFTLIN_CHECKOUT``). ``bench/README.md`` explains the figures, the machine and the tuning.

Every figure is a *ratio* of times taken in the same run, on the same data, with the candidates timed in
turn (interleaved) and the minimum kept over several repeats: load from other processes only ever adds
time, so the minimum is the least disturbed estimate, and interleaving exposes every candidate to the same
load. Times are CPU times of the process on one thread (see :func:`compare_times`).

1. Streaming softmax attention over one long prompt against one plain read pass over the same tokens,
   against a naive materialised softmax (:func:`naive_softmax_attention`), and its extra memory.
2. The training step of the experiment (``softlin.experiment.sgd_step``): one start (its softmax and its linear
   model) against the batch-drawing floor, S starts in one batched step against one start, and one model
   against a plain PyTorch loop (:class:`ReferenceTraining`).
3. The time the closed-form infinite-prompt flow of chapter 5 takes to come within ``1e-8`` of the
   Bayes-optimal parameters (:func:`flow_time`).
"""

from __future__ import annotations

import contextlib
import json
import math
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from softlin import softmax_attention
from softlin._fast import auto_chunk_size as _auto_chunk_size  # the kernel being measured


def check_positive_int(name, value, *, allow_none=False):
    """The harness's own argument check (the library's validators are private to it)."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


GOALS = {
    "stream_speed": 0.75,  # softmax attention, one query: speed as a fraction of one pass tokens.sum(0)
    "stream_memory_mb": 8.0,  # extra memory of the streamed call: O(chunk), far below the tokens' size
    "step_vs_floor": 1.3,  # one start (softmax + linear) per step, against drawing the batch alone (f32)
    "starts_vs_one": 2.0,  # STARTS starts x {softmax, linear} in one batched step, against one start
    "flow_seconds": 1.0,  # infinite-prompt flow to within 1e-8 of theta*
}
STARTS = 8  # the starts of the batched-starts figure (chapter 5 trains 8 per prompt length)
GOAL_L = 10**7  # the prompt length at which the streaming speed goal is set
PAPER_STEPS = 300_000  # SGD steps per prompt length in the paper's experiment


# --------------------------------------------------------------------------------------------------
# reporting and timing


@dataclass
class Figure:
    """One measured figure with its goal, printed as one line by ``make bench``.

    Attributes
    ----------
    name : str            what was measured, e.g. ``"streaming f64 L=1e7 Q=1"``
    text : str            the measurement in words, e.g. ``"speed 0.85x read pass"``
    goal : str            the goal in words, e.g. ``">= 0.75x"``; empty for figures given for information
    passed : bool or None whether the goal is met; None when there is no goal
    data : dict           the raw measurements behind the text (seconds, errors, MB), for checks
    """

    name: str
    text: str
    goal: str = ""
    passed: bool | None = None
    data: dict = field(default_factory=dict)

    def line(self):
        """``"name: text (goal ...) PASS"``, or ``"name: text (information)"`` without a goal."""
        if self.passed is None:
            return f"{self.name}: {self.text} (information)"
        return f"{self.name}: {self.text} (goal {self.goal}) {'PASS' if self.passed else 'FAIL'}"


@contextlib.contextmanager
def single_thread(threads=1):
    """Run the enclosed code with ``torch.set_num_threads(threads)``, restoring the previous count."""
    check_positive_int("threads", threads)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def compare_times(candidates, *, repeats=5, number=1, clock="cpu"):
    """Best time per call of each candidate, timed in turn.

    Parameters
    ----------
    candidates : dict name -> callable without arguments
    repeats : int, rounds; in each round every candidate runs ``number`` times in a row
    number : int, calls per timing (use more than one for calls of a few milliseconds)
    clock : "cpu" (default) or "wall". "cpu" is the CPU time of this process
        (``time.process_time``): on a shared machine the scheduler takes the core away for milliseconds at
        a time, which wall time counts and CPU time does not. For single-threaded work the two agree on
        an idle machine.

    Returns
    -------
    dict name -> seconds per call (the minimum over rounds, after one untimed warm-up call each).
    """
    check_positive_int("repeats", repeats)
    check_positive_int("number", number)
    if clock not in ("cpu", "wall"):
        raise ValueError(f"clock must be 'cpu' or 'wall', got {clock!r}")
    if not candidates or not all(callable(f) for f in candidates.values()):
        raise TypeError("candidates must be a non-empty dict of name -> callable")
    now = time.process_time if clock == "cpu" else time.perf_counter
    for fn in candidates.values():
        fn()
    best = dict.fromkeys(candidates, math.inf)
    for _ in range(repeats):
        for name, fn in candidates.items():
            t0 = now()
            for _ in range(number):
                fn()
            best[name] = min(best[name], (now() - t0) / number)
    return best


# --------------------------------------------------------------------------------------------------
# 1. streaming softmax attention


def attention_problem(L, D=6, Q=1, *, dtype=torch.float64, seed=0, scale=0.3):
    """A long prompt of standard Gaussian tokens with ``Q`` queries and random ``U`` (entries of size
    ``scale``) and ``V`` (one output row).

    The tokens are drawn in float32 and converted: PyTorch's float64 Gaussian sampler is several times
    slower per number, and the figures do not depend on the last bits of the tokens.

    Returns
    -------
    (tokens (L, D), queries (Q, D), U (D, D), V (1, D)) in ``dtype``.
    """
    for name, value in (("L", L), ("D", D), ("Q", Q)):
        check_positive_int(name, value)
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randn(L, D, generator=g).to(dtype)
    queries = torch.randn(Q, D, generator=g, dtype=dtype)
    U = scale * torch.randn(D, D, generator=g, dtype=dtype)
    V = torch.randn(1, D, generator=g, dtype=dtype)
    return tokens, queries, U, V


def read_pass(tokens):
    """The yardstick of the streaming figures: one plain read pass over the tokens, ``tokens.sum(0)``."""
    return tokens.sum(0)


def naive_softmax_attention(tokens, queries, U, V):
    """The textbook implementation, as a reference: materialise all ``(Q, L)`` scores, exponentiate
    without a shift, normalise, and weight the materialised values ``(L, D_out)``.

    Equal to :func:`softlin.softmax_attention` while the scores stay below the overflow threshold of the
    dtype (``exp`` overflows at 709 in float64, at 88 in float32); no input checks.

    Parameters
    ----------
    tokens : (L, D); queries : (Q, D); U : (D, D); V : (D_out, D).

    Returns
    -------
    Tensor, shape (Q, D_out).
    """
    scores = queries @ U.mT @ tokens.mT  # (Q, L)
    e = torch.exp(scores)
    p = e / e.sum(-1, keepdim=True)
    return p @ (tokens @ V.mT)


def rounding_bound(tokens, queries, U):
    """A first-order bound on the rounding error of the streamed tilted mean in the tokens' dtype.

    Each score ``z_i . a`` (with ``a = U z`` itself a sum of D products) is computed with an absolute
    error of at most ``2 D eps sum_j |z_ij a_j|``; since ``d m / d s_i = p_i (z_i - m)``, the scores' errors
    move the mean by at most ``2 max|z|`` times the largest of them. The chunk sums add about
    ``sqrt(c) eps max|z|`` (the random-walk size of a sum of c rounded terms, c the length of the shortest
    products, see ``softlin._fast.weighted_sum``), counted four times over. Returns a float.
    """
    from softlin._fast import SUB_BLOCKS, auto_chunk_size

    eps = torch.finfo(tokens.dtype).eps
    D = tokens.shape[-1]
    a = (queries @ U.mT).double()  # (Q, D)
    z = tokens.double().abs()
    zmax = float(z.max())
    smax = float((z @ a.abs().mT).max())  # max_i sum_j |z_ij a_j|
    c = (auto_chunk_size(tokens, queries.shape[-2]) or tokens.shape[-2]) / SUB_BLOCKS
    return 2 * zmax * 2 * D * eps * smax + 4 * math.sqrt(c) * eps * zmax


def streaming_times(
    L, *, D=6, Q=1, dtype=torch.float64, repeats=5, naive=True, unchunked=True, threads=1
):
    """Times (seconds per call) of the streaming figures for one prompt of ``L`` tokens.

    Candidates: ``read`` (:func:`read_pass`), ``flat_read`` (``tokens.sum()``, a reduction over
    contiguous memory: the machine's memory speed, for information), ``softmax`` (the library with its
    default streaming), ``unchunked`` (``chunk_size=L``: one pass that materialises the scores) and
    ``naive`` (:func:`naive_softmax_attention`); the last two can be left out (they need O(L Q) memory).

    Returns
    -------
    dict name -> seconds, plus ``rounding_bound`` (:func:`rounding_bound`), ``max_abs_error``: the
    largest difference between the library's output
    and a float64 reference (the unchunked pass on the same tokens in float64, or the streamed one when
    the unchunked pass is left out; 0 when that is the library's own float64 call) and, with the naive
    candidate, ``naive_error``, the same for :func:`naive_softmax_attention`.
    """
    tokens, queries, U, V = attention_problem(L, D, Q, dtype=dtype)
    candidates = {
        "read": lambda: read_pass(tokens),
        "flat_read": tokens.sum,
        "softmax": lambda: softmax_attention(tokens, queries, U, V),
    }
    if unchunked:
        candidates["unchunked"] = lambda: softmax_attention(tokens, queries, U, V, chunk_size=L)
    if naive:
        candidates["naive"] = lambda: naive_softmax_attention(tokens, queries, U, V)
    with single_thread(threads):
        times = compare_times(candidates, repeats=repeats)
        out = softmax_attention(tokens, queries, U, V).double()
        args64 = [x.double() for x in (tokens, queries, U, V)]
        ref = softmax_attention(*args64, chunk_size=L if unchunked else None)
        times["max_abs_error"] = float((out - ref).abs().max())
        times["rounding_bound"] = rounding_bound(tokens, queries, U)
        if naive:
            naive_out = naive_softmax_attention(tokens, queries, U, V).double()
            times["naive_error"] = float((naive_out - ref).abs().max())
    return times


_MEMORY_CHILD = """
import json, os, re, sys, torch
import softlin as sl
sys.path.insert(0, os.environ["SOFTLIN_BENCH_DIR"])
import benchmarks as bm


def status(key):
    return int(re.search(key + r":\\s+(\\d+) kB", open("/proc/self/status").read()).group(1))


def measure(L, D, Q, dtype, which, chunk):
    tokens, queries, U, V = bm.attention_problem(L, D, Q, dtype=getattr(torch, dtype))
    fn = {"softmax": lambda t, q, u, v: sl.softmax_attention(t, q, u, v, chunk_size=chunk),
          "naive": bm.naive_softmax_attention}[which]
    fn(tokens[:64], queries, U, V)  # the smallest kernels
    extra = []
    for _ in range(2):
        open("/proc/self/clear_refs", "w").write("5")  # reset the peak (VmHWM) to the current resident size
        base = status("VmRSS")
        out = fn(tokens, queries, U, V)
        extra.append(status("VmHWM") - base)
        del out
    return {"first": extra[0] / 1024, "repeat": extra[1] / 1024,
            "tokens": tokens.numel() * tokens.element_size() / 2**20}


for config in json.loads(sys.argv[1]):  # one forked process per measurement: a clean heap each time
    pid = os.fork()
    if pid == 0:
        print(json.dumps(measure(*config)), flush=True)
        os._exit(0)
    _, code = os.waitpid(pid, 0)
    if code != 0:
        sys.exit(f"measurement {config} failed with status {code}")
"""


def extra_memory_mb(
    L, *, D=6, Q=1, dtype=torch.float64, which="softmax", chunk_size=None, timeout=600
):
    """Peak extra resident memory (MiB) of an attention call, beyond the inputs, in a fresh process.

    A fresh Python process (forked once more per measurement, see :func:`extra_memory_table`) builds the
    problem (:func:`attention_problem`), runs the call once on 64 tokens, then twice on the whole prompt,
    each time resetting its peak resident size first (``echo 5 > /proc/self/clear_refs``) and reading
    ``VmHWM - VmRSS`` from ``/proc/self/status``. The first full call also pays one-time costs (library
    code and buffers paged in on first use, about 2.5 MiB with MKL); the second can reuse memory that
    the allocator kept from the first, so it is a lower bound of what later calls need. A fresh process
    is needed for the same reason: memory freed by earlier calls stays with the allocator and would hide
    the growth. Linux only.

    Parameters
    ----------
    which : "softmax" (the library, with ``chunk_size``) or "naive" (:func:`naive_softmax_attention`).

    Returns
    -------
    dict with ``first`` and ``repeat`` (MiB on the first and the second full call) and ``tokens`` (the
    tokens' own size, MiB).

    Raises
    ------
    RuntimeError if the measurement fails (the message holds its standard error).
    """
    return extra_memory_table(
        [dict(L=L, D=D, Q=Q, dtype=dtype, which=which, chunk_size=chunk_size)], timeout=timeout
    )[0]


def extra_memory_table(configs, *, timeout=600):
    """:func:`extra_memory_mb` for several calls, in one fresh process that imports torch once and forks a
    clean child per call (each dict in ``configs`` holds the keyword arguments of
    :func:`extra_memory_mb`, with ``L``). Returns the list of result dicts, in order."""
    rows = []
    for config in configs:
        c = dict(D=6, Q=1, dtype=torch.float64, which="softmax", chunk_size=None) | dict(config)
        if c["which"] not in ("softmax", "naive"):
            raise ValueError(f"which must be 'softmax' or 'naive', got {c['which']!r}")
        for name in ("L", "D", "Q"):
            check_positive_int(name, c[name])
        check_positive_int("chunk_size", c["chunk_size"], allow_none=True)
        dtype = str(c["dtype"]).removeprefix("torch.")
        rows.append([c["L"], c["D"], c["Q"], dtype, c["which"], c["chunk_size"]])
    proc = subprocess.run(
        [sys.executable, "-c", _MEMORY_CHILD, json.dumps(rows)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_single_thread_env(),
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"memory measurement failed:\n{proc.stderr[-2000:]}")
    out = [json.loads(line) for line in proc.stdout.strip().splitlines() if line.startswith("{")]
    if len(out) != len(rows):
        raise RuntimeError(f"memory measurement returned {len(out)} results for {len(rows)} calls")
    return out


def _single_thread_env():
    import os

    env = dict(os.environ)
    env.update(
        OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", SOFTLIN_BENCH_DIR=str(Path(__file__).parent)
    )
    return env


# --------------------------------------------------------------------------------------------------
# 2. training step of the experiment's model


class ReferenceAttention(torch.nn.Module):
    """The experiment's single-head model written the plain way: separate bias-free ``nn.Linear``
    projections ``q, k, v`` (D -> D) and ``o`` (D -> 1), scores ``q(z_q) . k(z_i) / sqrt(D)``, softmax
    over the L prompt tokens (the query is not a key), output ``o(sum_i p_i v(z_i))``.

    ``forward(tokens (B, L, D), queries (B, 1, D)) -> (B,)``.
    """

    def __init__(self, D, *, dtype=torch.float32, device=None):
        super().__init__()
        check_positive_int("D", D)
        kw = {"bias": False, "dtype": dtype, "device": device}
        self.q, self.k, self.v = (torch.nn.Linear(D, D, **kw) for _ in range(3))
        self.o = torch.nn.Linear(D, 1, **kw)

    def forward(self, tokens, queries):
        scores = self.q(queries) @ self.k(tokens).mT / math.sqrt(tokens.shape[-1])  # (B, 1, L)
        return self.o(torch.softmax(scores, dim=-1) @ self.v(tokens)).reshape(-1)

    @classmethod
    def from_full_attention(cls, model):
        """The same weights as a :class:`softlin.experiment.FullAttention` (``nn.Linear`` stores ``(out, in)``,
        as ``FullAttention`` does)."""
        ref = cls(model.D, dtype=model.Q.dtype, device=model.Q.device)
        with torch.no_grad():
            for layer, w in zip((ref.q, ref.k, ref.v), (model.Q, model.K, model.V)):
                layer.weight.copy_(w)
            ref.o.weight.copy_(model.o[None])
        return ref


class ReferenceTraining:
    """A plain training loop for the experiment, as its authors' code does it: a fresh batch sampled
    with ``torch.randn`` every step (``x ~ N(0, Sigma)``, ``w ~ N(0, tau2 I)``, labels ``w^T x`` plus
    noise of variance ``noise_var``, tokens ``(x, y)``, query ``(x_q, 0)``), :class:`ReferenceAttention`,
    ``nn.MSELoss`` and ``torch.optim.SGD``.

    Parameters
    ----------
    model : ReferenceAttention
    Sigma : Tensor (d, d), positive definite, with ``d = D - 1``.
    L, batch_size : int; lr : float; tau2, noise_var : floats (1/d and 0.1 in the experiment).
    """

    def __init__(self, model, Sigma, L, batch_size, *, lr, tau2, noise_var):
        if not isinstance(model, ReferenceAttention):
            raise TypeError(f"model must be a ReferenceAttention, got {type(model).__name__}")
        check_positive_int("L", L)
        check_positive_int("batch_size", batch_size)
        self.model, self.L, self.batch_size = model, L, batch_size
        self.tau2, self.noise_var = float(tau2), float(noise_var)
        self.chol = torch.linalg.cholesky(Sigma)
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr)
        self.loss_fn = torch.nn.MSELoss()

    def sample(self, generator=None):
        """A fresh batch: ``(tokens (B, L, D), queries (B, 1, D), targets (B,))``."""
        B, L, d = self.batch_size, self.L, self.chol.shape[0]
        kw = {"generator": generator, "dtype": self.chol.dtype, "device": self.chol.device}
        x = torch.randn(B, L + 1, d, **kw) @ self.chol.T
        w = torch.randn(B, d, 1, **kw) * math.sqrt(self.tau2)
        y = (x @ w).squeeze(-1) + math.sqrt(self.noise_var) * torch.randn(B, L + 1, **kw)
        tokens = torch.cat([x[:, :L], y[:, :L, None]], dim=-1)
        queries = torch.cat(
            [x[:, L:], torch.zeros(B, 1, 1, dtype=x.dtype, device=x.device)], dim=-1
        )
        return tokens, queries, y[:, L]

    def loss_and_grad(self, tokens, queries, targets):
        """Batch MSE and the gradients of ``(q, k, v, o)`` weights by autograd (``o`` as a (D,) vector)."""
        self.model.zero_grad()
        loss = self.loss_fn(self.model(tokens, queries), targets)
        loss.backward()
        m = self.model
        return loss.detach(), (
            m.q.weight.grad,
            m.k.weight.grad,
            m.v.weight.grad,
            m.o.weight.grad[0],
        )

    def step(self, generator=None):
        """Sample a batch and take one SGD step; returns the batch loss (float)."""
        return self.step_on(*self.sample(generator))

    def step_on(self, tokens, queries, targets):
        """One SGD step on a given batch; returns the batch loss (float)."""
        self.optimizer.zero_grad()
        loss = self.loss_fn(self.model(tokens, queries), targets)
        loss.backward()
        self.optimizer.step()
        return loss.item()


def training_step_times(
    *,
    L=1000,
    batch_size=128,
    d=5,
    starts=STARTS,
    dtype=torch.float32,
    steps=10,
    repeats=5,
    lr=1e-3,
    threads=1,
    seed=0,
):
    """Seconds per SGD step, fresh batch included, of the experiment's training (``softlin.icl``).

    Candidates: ``sampling`` (``PromptSampler.sample`` alone: the floor of any step on fresh data);
    ``one_start`` (one start, its softmax and its linear model, ``experiment.sgd_step`` on a fresh batch);
    ``starts`` (``starts`` starts x {softmax, linear} in one step); ``one_model`` (one softmax model, the
    step of the plain loop's layout); ``plain`` (one start through the readable path, ``fused=False``,
    autograd); ``reference`` and ``reference_sampling`` (:class:`ReferenceTraining`, one softmax model,
    and its own batch draw); ``one_start_fixed`` and ``reference_fixed`` (a step on one fixed batch: the
    training code alone). All on the experiment's data model (KMS(d, 0.5), ``tau2 = 1/d``, noise 0.1).

    Returns a dict name -> seconds per step.
    """
    from softlin import experiment, icl

    Sigma = icl.kms_covariance(d, 0.5, dtype=dtype)
    tau2, noise_var = 1.0 / d, 0.1
    gen = torch.Generator().manual_seed(seed)

    def pair(S):
        soft = experiment.FullAttention.initialise(
            d, generator=torch.Generator().manual_seed(seed), dtype=dtype, starts=S
        )
        return [soft, soft.clone(kind="linear")]

    one, many, plain = pair(1), pair(starts), pair(1)
    single = [
        experiment.FullAttention.initialise(
            d, generator=torch.Generator().manual_seed(seed), dtype=dtype
        )
    ]
    sampler = icl.PromptSampler(Sigma, L, batch_size, tau2=tau2, noise_var=noise_var)
    reference = ReferenceTraining(
        ReferenceAttention.from_full_attention(single[0]),
        Sigma,
        L,
        batch_size,
        lr=lr,
        tau2=tau2,
        noise_var=noise_var,
    )
    fixed = icl.sample_prompts(Sigma, L, batch_size, tau2=tau2, noise_var=noise_var, generator=gen)
    fixed_ref = reference.sample(gen)
    tiny = 1e-12  # steps on one fixed batch: keep the weights (almost) where they are
    candidates = {
        "sampling": lambda: sampler.sample(gen),
        "one_start": lambda: experiment.sgd_step(one, sampler.sample(gen), lr),
        "starts": lambda: experiment.sgd_step(many, sampler.sample(gen), lr),
        "one_model": lambda: experiment.sgd_step(single, sampler.sample(gen), lr),
        "plain": lambda: experiment.sgd_step(plain, sampler.sample(gen), lr, fused=False),
        "reference": lambda: reference.step(gen),
        "reference_sampling": lambda: reference.sample(gen),
        "one_start_fixed": lambda: experiment.sgd_step(one, fixed, tiny),
        "reference_fixed": lambda: reference.step_on(*fixed_ref),
    }
    with single_thread(threads):
        return compare_times(candidates, repeats=repeats, number=steps)


# --------------------------------------------------------------------------------------------------
# 3. infinite-prompt flow


def flow_time(*, tol=1e-8, d=5, rho=0.5, alpha=0.3, seed=0, t_max=100.0, repeats=3):
    """Wall time for :func:`softlin.icl.infinite_prompt_flow` to bring ``theta = (A, b)`` within ``tol``
    of the Bayes-optimal ``theta* = (A*, b*)`` (Euclidean norm over all entries).

    The first flow time ``T`` with ``||theta(T) - theta*|| <= tol`` is located on a grid of step 0.5
    up to ``t_max``; the figure is the best of ``repeats`` timed solves (CPU time) from ``0`` to ``T``
    (the solver's default method and tolerances), from the balanced start of scale ``alpha`` (rank d,
    drawn with ``seed``) on the KMS(d, rho) covariance.

    Returns
    -------
    dict with ``seconds``, ``T`` (flow time reached), ``distance`` (``||theta(T) - theta*||``).

    Raises
    ------
    RuntimeError if the flow does not come within ``tol`` before ``t_max``.
    """
    import numpy as np
    from softlin import icl

    Sigma = icl.kms_covariance(d, rho)
    A_star, b_star = icl.bayes_optimal_parameters(Sigma)
    A0, b0 = icl.balanced_initialisation(d, alpha, generator=torch.Generator().manual_seed(seed))
    grid = np.arange(0.0, t_max + 0.25, 0.5)
    dist = icl.infinite_prompt_flow(A0, b0, Sigma, grid).distance_to(A_star, b_star).numpy()
    hits = np.nonzero(dist <= tol)[0]
    if hits.size == 0:
        raise RuntimeError(
            f"the flow did not come within {tol:g} of theta* by t = {t_max:g} "
            f"(closest {dist.min():.2e})"
        )
    T = float(grid[hits[0]])
    best, traj = math.inf, None
    for _ in range(repeats):
        t0 = time.process_time()  # CPU time, as in compare_times
        traj = icl.infinite_prompt_flow(A0, b0, Sigma, [0.0, T])
        best = min(best, time.process_time() - t0)
    return {"seconds": best, "T": T, "distance": float(traj.distance_to(A_star, b_star)[-1])}


# --------------------------------------------------------------------------------------------------
# the figures, as printed by ``make bench`` and the Performance page


def _fmt_L(L):
    exp = round(math.log10(L))
    return f"1e{exp}" if L == 10**exp else str(L)


def _short(dtype):
    return {torch.float64: "f64", torch.float32: "f32"}.get(dtype, str(dtype))


def streaming_figures(
    L, *, many_queries=64, repeats=5, dtypes=(torch.float64, torch.float32), memory_dtypes=None
):
    """The figures of target 1 for a prompt of ``L`` tokens of dimension 6 (see :func:`streaming_times`
    and :func:`extra_memory_mb`): speed against a read pass (goal ``GOALS["stream_speed"]``, attached
    from ``L = 10^7``, where the goal is set: shorter prompts may sit in the cache), against the
    naive softmax (goal: faster), accuracy against float64, extra memory (goal: at most
    ``GOALS["stream_memory_mb"]`` and no more than for a prompt of ``L / 10`` tokens, or two chunks if
    that is longer, streamed in the same chunks; measured for ``memory_dtypes``, default all of
    ``dtypes``), and ``many_queries`` queries in one call against as many one-query calls (goal: faster;
    0 leaves it out). Each figure's ``data`` holds the raw measurements.

    Returns
    -------
    list of Figure
    """
    check_positive_int("L", L)
    memory_dtypes = dtypes if memory_dtypes is None else memory_dtypes
    goal, mem_goal = GOALS["stream_speed"], GOALS["stream_memory_mb"]
    figs, single = [], {}
    for dtype in dtypes:
        name = f"streaming {_short(dtype)} L={_fmt_L(L)} Q=1"
        t = streaming_times(L, dtype=dtype, repeats=repeats)
        single[dtype] = t["softmax"]
        speed = t["read"] / t["softmax"]
        text = (
            f"speed {speed:.2f}x read pass ({1e3 * t['softmax']:.1f} ms vs {1e3 * t['read']:.1f} ms; "
            f"flat sum at memory speed {1e3 * t['flat_read']:.1f} ms)"
        )
        if L >= GOAL_L:
            figs.append(Figure(name, text, f">= {goal}x", speed >= goal, dict(t, speed=speed)))
        else:  # the tokens may sit in the cache, where reading them is faster and fixed costs weigh more
            text += f"; the goal >= {goal}x is set at L = 1e7"
            figs.append(Figure(name, text, data=dict(t, speed=speed)))
        figs.append(
            Figure(
                name,
                f"naive materialised softmax {t['naive'] / t['softmax']:.2f}x slower "
                f"({1e3 * t['naive']:.1f} ms); unchunked pass {1e3 * t['unchunked']:.1f} ms",
                "faster than naive",
                t["naive"] > t["softmax"],
                t,
            )
        )
        figs.append(
            Figure(
                name,
                f"max error vs float64 {t['max_abs_error']:.1e} (naive {t['naive_error']:.1e})",
                data=t,
            )
        )
        if dtype in memory_dtypes:
            figs.append(_memory_figure(name, L, dtype, mem_goal))
    if many_queries:
        Q = many_queries
        for dtype in dtypes:
            t = streaming_times(
                L, Q=Q, dtype=dtype, repeats=max(2, repeats // 2), naive=False, unchunked=False
            )
            gain = Q * single[dtype] / t["softmax"]
            figs.append(
                Figure(
                    f"streaming {_short(dtype)} L={_fmt_L(L)} Q={Q}",
                    f"{t['softmax']:.2f} s, {1e3 * t['softmax'] / Q:.1f} ms per query "
                    f"({t['softmax'] / (Q * t['read']):.2f} read passes per query); "
                    f"{gain:.1f}x faster than {Q} one-query calls",
                    "faster than one call per query",
                    gain > 1,
                    dict(t, gain=gain),
                )
            )
    return figs


def _memory_figure(name, L, dtype, goal):
    chunk = (
        _auto_chunk_size(torch.empty(L, 6, dtype=dtype, device="meta"), 1) or L
    )  # the default chunk
    short = min(max(L // 10, 2 * chunk), L)  # a shorter prompt, still streamed in the same chunks
    try:
        streamed, shorter, unchunked, naive = extra_memory_table(
            [
                dict(L=L, dtype=dtype),
                dict(L=short, dtype=dtype, chunk_size=chunk),
                dict(L=L, dtype=dtype, chunk_size=L),
                dict(L=L, dtype=dtype, which="naive"),
            ]
        )
    except (
        OSError,
        RuntimeError,
        subprocess.SubprocessError,
    ) as exc:  # no /proc (not Linux), no fork, ...
        return Figure(
            name, f"extra memory not measured here ({type(exc).__name__}: {str(exc)[-200:]})"
        )
    mem = {
        "streamed": streamed["first"],
        "streamed_repeat": streamed["repeat"],
        "short_L": short,
        "streamed_short": shorter["first"],
        "unchunked": unchunked["first"],
        "naive": naive["first"],
        "tokens": streamed["tokens"],
    }
    text = (
        f"extra memory {mem['streamed']:.1f} MB on a first call, {mem['streamed_repeat']:.2f} MB on the "
        f"next (first call at L={_fmt_L(short)}: {mem['streamed_short']:.1f} MB; unchunked "
        f"{mem['unchunked']:.0f} MB, naive {mem['naive']:.0f} MB; tokens {mem['tokens']:.0f} MB)"
    )
    passed = mem["streamed"] <= goal and mem["streamed"] <= mem["streamed_short"] + 1.0
    return Figure(name, text, f"<= {goal:g} MB and O(chunk)", passed, mem)


def training_figures(
    *,
    dtypes=(torch.float32, torch.float64),
    steps=10,
    repeats=5,
    L=1000,
    batch_size=128,
    starts=STARTS,
):
    """The figures of target 2 at the experiment's sizes (:func:`training_step_times`): one start against
    the batch-drawing floor (goal ``GOALS["step_vs_floor"]``) and ``starts`` starts in one step against
    one start (goal ``GOALS["starts_vs_one"]``), both in float32 (the experiment's dtype); the fused step
    against the readable autograd path and one model against the plain ``nn.Module`` loop, for
    information; float64 for information.

    Returns (list of Figure, dict dtype -> seconds per one-start step).
    """
    figs, step = [], {}
    for dtype in dtypes:
        t = training_step_times(
            L=L, batch_size=batch_size, dtype=dtype, steps=steps, repeats=repeats, starts=starts
        )
        step[dtype] = t["one_start"]
        name = f"training step {_short(dtype)} B={batch_size} L={L} d=5"
        floor, many = t["one_start"] / t["sampling"], t["starts"] / t["one_start"]
        ms = {k: f"{1e3 * v:.2f}" for k, v in t.items()}
        data = dict(t, step_vs_floor=floor, starts_vs_one=many)
        f32 = dtype == torch.float32
        text = (
            f"one start (softmax + linear model) {ms['one_start']} ms = {floor:.2f}x drawing the batch "
            f"alone ({ms['sampling']} ms)"
        )
        figs.append(
            Figure(
                name, text, f"<= {GOALS['step_vs_floor']:g}x", floor <= GOALS["step_vs_floor"], data
            )
            if f32
            else Figure(name, text, data=data)
        )
        text = f"{starts} starts x {{softmax, linear}} in one step {ms['starts']} ms = {many:.2f}x one start"
        figs.append(
            Figure(
                name, text, f"<= {GOALS['starts_vs_one']:g}x", many <= GOALS["starts_vs_one"], data
            )
            if f32
            else Figure(name, text, data=data)
        )
        figs.append(
            Figure(
                name,
                f"fused step {t['plain'] / t['one_start']:.1f}x faster than the readable "
                f"autograd path ({ms['plain']} ms); one softmax model {ms['one_model']} ms "
                f"vs the plain nn.Module loop {ms['reference']} ms "
                f"({t['reference'] / t['one_model']:.1f}x; its own draw "
                f"{ms['reference_sampling']} ms); on a fixed batch one start "
                f"{ms['one_start_fixed']} ms vs {ms['reference_fixed']} ms",
                data=data,
            )
        )
    return figs, step


def flow_figures(step_seconds=None):
    """The figure of target 3 (see :func:`flow_time`), with, for scale, the time the paper's SGD run at
    one prompt length would take (``PAPER_STEPS`` steps at the float32 step time in ``step_seconds``)."""
    f = flow_time()
    text = (
        f"||theta - theta*|| = {f['distance']:.1e} at flow time {f['T']:g} in {f['seconds']:.3f} s"
    )
    if step_seconds and torch.float32 in step_seconds:
        sgd = PAPER_STEPS * step_seconds[torch.float32]
        step_ms = 1e3 * step_seconds[torch.float32]
        text += (
            f" (the paper's SGD of one start at L = 1000: {PAPER_STEPS} steps x {step_ms:.1f} ms = "
            f"{sgd / 60:.0f} min)"
        )
    goal = GOALS["flow_seconds"]
    return [Figure("infinite-prompt flow d=5", text, f"< {goal:g} s", f["seconds"] < goal, f)]


def markdown_table(figures):
    """A Markdown table (figure, measurement, goal, result) of a list of :class:`Figure`."""
    rows = ["| figure | measured | goal | result |", "|---|---|---|---|"]
    for f in figures:
        result = "" if f.passed is None else ("met" if f.passed else "**not met**")
        rows.append(
            f"| {f.name} | {f.text.replace('|', chr(92) + '|')} | {f.goal or 'information'} | {result} |"
        )
    return "\n".join(rows)
