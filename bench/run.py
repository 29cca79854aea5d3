#!/usr/bin/env python
"""``make bench``: the performance figures of the issue "performance", one line per figure, each with
its goal.

    .venv/bin/python bench/run.py             # full sizes (L = 10^7), about a minute
    .venv/bin/python bench/run.py --L 1e6     # a shorter run
    .venv/bin/python bench/run.py --profile   # also print torch-profiler tables of the timed calls

Every figure is a ratio of times measured in this run, with the candidates timed in turn and the best of
several repeats kept. The reference implementations (naive softmax, the plain ``nn.Module`` training
loop), the timing harness and the figures live in ``bench/benchmarks.py`` (beside this script, not in the
installed package), so that the book's Performance page can run the same code at small sizes; this
script is the full-size driver. Timings use
one thread. The book lines read the build records ``_build/test-stage/status.json`` (fast mode, written
by ``make test``) and ``_build/stage/status.json`` (written by ``make book``) when they exist.

``bench/README.md`` explains each figure, the limits of the machine and the profiles.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import softlin as sl
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchmarks as bm

ROOT = Path(__file__).resolve().parents[1]
BOOK_GOALS = {"fast": 120.0, "default": 600.0}  # seconds for all chapters


def book_figures():
    """One line per build record: the total papermill time of all chapters, per chapter in brackets."""
    figs = []
    for path in (
        ROOT / "_build" / "test-stage" / "status.json",
        ROOT / "_build" / "stage" / "status.json",
    ):
        if not path.exists():
            where = path.relative_to(ROOT)
            figs.append(bm.Figure(f"book ({path.parent.name})", f"no build record at {where}"))
            continue
        rec = json.loads(path.read_text())
        mode, chapters = rec["mode"], rec["chapters"]
        summed = sum(c["seconds"] for c in chapters)
        # The goal is for the whole execution ("all chapters together"): its wall-clock time when the
        # record has it (notebooks run 2 at a time share the cores, so the summed times count twice).
        total = rec.get("wall_seconds") or summed
        failed = [c["chapter"] for c in chapters if c["error"]]
        per = ", ".join(f"{c['chapter']} {c['seconds']:.0f} s" for c in chapters)
        text = (
            f"{total:.0f} s wall for {len(chapters)} notebooks, {rec.get('jobs', 1)} at a time "
            f"(summed {summed:.0f} s: {per})"
        )
        if failed:
            text += f"; FAILED: {', '.join(failed)}"
        name = f"book {mode} mode ({path.parent.name})"
        goal = BOOK_GOALS.get(mode)
        figs.append(
            bm.Figure(name, text)
            if goal is None
            else bm.Figure(name, text, f"< {goal:g} s", total < goal and not failed)
        )
    return figs


def profiles(L):
    """torch-profiler tables of one streaming call per dtype and of ten training steps of each loop."""
    from softlin import experiment, icl
    from torch.profiler import ProfilerActivity, profile

    def show(title, fn, *args):
        fn(*args)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            fn(*args)
        print(f"\n== {title}")
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=8))

    def attention_then_read(tokens, queries, U, V):
        return sl.softmax_attention(tokens, queries, U, V), bm.read_pass(tokens)

    def softlin_steps(models, sampler, gen):
        return [experiment.sgd_step(models, sampler.sample(gen), 1e-3) for _ in range(10)]

    def reference_steps(ref, gen):
        return [ref.step(gen) for _ in range(10)]

    for dtype in (torch.float64, torch.float32):
        tokens, queries, U, V = bm.attention_problem(L, dtype=dtype)
        title = f"softmax_attention {dtype} L={L} Q=1, then tokens.sum(0)"
        show(title, attention_then_read, tokens, queries, U, V)
    for dtype in (torch.float32, torch.float64):
        Sigma = icl.kms_covariance(5, 0.5, dtype=dtype)
        gen = torch.Generator().manual_seed(0)
        soft = experiment.FullAttention.initialise(5, generator=gen, dtype=dtype, starts=bm.STARTS)
        models = [soft, soft.clone(kind="linear")]
        sampler = icl.PromptSampler(Sigma, 1000, 128, tau2=0.2, noise_var=0.1)
        ref = bm.ReferenceTraining(
            bm.ReferenceAttention.from_full_attention(
                experiment.FullAttention(*(w[0] for w in soft.parameters()))
            ),
            Sigma,
            1000,
            128,
            lr=1e-3,
            tau2=0.2,
            noise_var=0.1,
        )
        title = f"softlin: 10 SGD steps of {bm.STARTS} starts x {{softmax, linear}}, {dtype}"
        show(title, softlin_steps, models, sampler, gen)
        show(f"reference: 10 SGD steps of one softmax model, {dtype}", reference_steps, ref, gen)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--L", type=float, default=1e7, help="prompt length of the streaming figures (1e7)"
    )
    ap.add_argument(
        "--repeats", type=int, default=5, help="timing rounds per figure (the best is kept)"
    )
    ap.add_argument("--profile", action="store_true", help="also print torch-profiler tables")
    args = ap.parse_args(argv)
    L = int(args.L)
    torch.set_num_threads(1)
    print(
        f"# softlin {sl.__version__}, torch {torch.__version__}, {platform.machine()}, {os.cpu_count()} "
        f"cores; CPU time on {torch.get_num_threads()} thread; every ratio measured in this run",
        flush=True,
    )
    figs = []

    def emit(new):
        for f in new:
            print(f.line(), flush=True)
        figs.extend(new)

    emit(bm.streaming_figures(L, repeats=args.repeats))
    train, step_seconds = bm.training_figures(repeats=args.repeats)
    emit(train)
    emit(bm.flow_figures(step_seconds))
    emit(book_figures())
    failed = [f for f in figs if f.passed is False]
    print(
        f"# {sum(f.passed is True for f in figs)} goals met, {len(failed)} not met"
        + ("; bench/README.md explains the limits" if failed else "")
    )
    if args.profile:
        profiles(L)
    return 0


if __name__ == "__main__":
    sys.exit(main())
