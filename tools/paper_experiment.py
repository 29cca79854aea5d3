#!/usr/bin/env python
"""The paper's experiment at one prompt length, resumable: chapter 5's training loop with checkpoints.

    .venv/bin/python tools/paper_experiment.py --L 200          # the paper's protocol at L = 200
    .venv/bin/python tools/paper_experiment.py --L 10 --L 20    # several lengths, one after the other
    .venv/bin/python tools/paper_experiment.py --merge          # per-length files -> book/data/...
    make paper-experiment L=200                                  # the same, then --merge

The protocol is ``softlin.experiment.INTENDED`` (or ``RELEASED``), the authors' released script: d = 5,
KMS(0.5) covariance, task prior N(0, I/d), label noise of variance 0.1, plain SGD at lr 1e-3 on the batch
MSE, 128 fresh prompts per step, 300 000 steps, PyTorch's default initialisation. Here ``--starts``
random starts (8 by default), each shared by its softmax and its linear model, and all 2S models train
on one data stream: one batch a step, read once by all of them (``softlin.experiment.sgd_step``). Seeds:
the starts come from ``seed``, the stream from ``seed + 1``, the test prompts from ``10_000 + L``; the
evaluation is ``softlin.experiment.evaluate`` (as on lesson 6's pages).

Every ``--checkpoint-every`` steps (1 000) the models, the stream's generator state and the history go to
``<out>/checkpoints/L<L>.pt`` (written atomically); a rerun resumes from it. The per-length result
``<out>/L<L>.json`` is rewritten at every record (every ``--record-every`` steps and at step 1 000), with
``complete: false`` until the last step, so an interrupted run still draws what it has. ``--merge``
collects them into the committed results file (``book/data/paper_experiment.json``), which lesson 6
draws (``softlin.experiment.load_results``) and ``tests/test_paper_experiment.py`` checks (the first 1 000 steps of one length rerun).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

import torch
from checkout import git

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "book" / "data" / "paper_experiment.json"
FIRST_BLOCK = 1_000  # the train loss over steps 1..1000 is recorded exactly (the rerun test)
RECORD_EVERY = 10_000


def _experiment():
    from softlin import experiment

    return experiment


def settings_of(protocol, record_every=RECORD_EVERY):
    """The settings a result file records: the protocol's fields (``experiment.Protocol``) but its
    lengths, with ``different_starts`` for ``separate_starts`` (the files' historical key); the inverse
    is ``experiment.Protocol.from_settings``."""
    import dataclasses

    fields = dataclasses.asdict(protocol)
    fields.pop("lengths")
    fields["different_starts"] = fields.pop("separate_starts")
    return {**fields, "record_every": record_every}


def evaluate(models, settings, L, device, *, baselines=False):
    """Test MSE of every start of every model (dict kind -> list of S floats) by
    ``experiment.evaluate``; with ``baselines``, also the Bayes and ridge errors and the start-averaged
    paired statistics with their test-set standard errors."""
    ev = _experiment().evaluate(
        list(models.values()),
        _experiment().Protocol.from_settings(settings),
        L,
        device=device,
        baselines=baselines,
    )
    out = {"mse": {k: ev.errors(k).mean(1).tolist() for k in models}}
    if baselines:
        n = settings["n_test"]

        def se(v):
            return float(v.std() / math.sqrt(n))

        gap = (ev.softmax - ev.linear).mean(0)  # start-averaged paired gap, per test prompt
        out.update(
            bayes=float(ev.bayes.mean()),
            bayes_se=se(ev.bayes),
            ridge=float(ev.ridge.mean()),
            ridge_se=se(ev.ridge),
            gap_test_se=se(gap),
            excess_test_se={k: se(ev.errors(k).mean(0) - ev.bayes) for k in models},
            excess_ridge_test_se={k: se(ev.excess(k).mean(0)) for k in models},
            gap_test_se_per_start=[se(g) for g in ev.softmax - ev.linear],
        )
    return out


# What the numbers depend on: these definitions, compared without docstrings and comments (so that a
# result can be matched with the commit that holds exactly this code, see merge).
TRAINING_CODE = {
    "lib/softlin/icl.py": ("kms_covariance", "PromptSampler", "sample_prompts"),
    "lib/softlin/experiment.py": (
        "Protocol",
        "FullAttention",
        "experiment_starts",
        "held_out_prompts",
        "bayes_errors",
        "Evaluation",
        "evaluate",
        "sgd_run",
        "_check_prompts",
        "sgd_step",
    ),
    "lib/softlin/_fast.py": ("fused_sgd_step", "_row_scales"),
    "lib/softlin/attention.py": ("tilted_mean", "linear_mean"),
    "tools/paper_experiment.py": ("settings_of", "evaluate", "run"),
}


def _digest(texts, code=None):
    """sha256 of the definitions named in ``code`` (default TRAINING_CODE: path -> names) in the module
    sources ``texts`` (path -> text)."""
    import ast
    import hashlib

    h = hashlib.sha256()
    for path, names in (code or TRAINING_CODE).items():
        tree = ast.parse(texts[path])
        for node in tree.body:
            if getattr(node, "name", None) in names:
                for sub in ast.walk(node):  # drop docstrings
                    body = getattr(sub, "body", None)
                    if (
                        isinstance(body, list)
                        and body
                        and isinstance(body[0], ast.Expr)
                        and isinstance(getattr(body[0], "value", None), ast.Constant)
                        and isinstance(body[0].value.value, str)
                    ):
                        sub.body = body[1:] or [ast.Pass()]
                h.update(ast.unparse(node).encode())
    return h.hexdigest()


def code_hash():
    """:func:`_digest` of the code as imported (softlin's package folder and this file)."""
    import softlin

    pkg = Path(softlin.__file__).resolve().parent
    files = {
        f: (
            Path(__file__).resolve()
            if f.startswith("tools/")
            else pkg / Path(f).relative_to("lib/softlin")
        )
        for f in TRAINING_CODE
    }
    return _digest({f: p.read_text() for f, p in files.items()})


def _training_code_of(tool_source):
    """The TRAINING_CODE dict of a version of this file (None where it has none)."""
    import ast

    for node in ast.parse(tool_source).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "TRAINING_CODE":
            return ast.literal_eval(node.value)
    return None


def _commit_with_code(digest):
    """The first commit of this checkout's history whose training code has ``digest``, or None."""
    revs = git("rev-list", "--reverse", "HEAD")
    if revs is None:
        return None
    for rev in revs.split():
        tool = git("show", f"{rev}:tools/paper_experiment.py")
        code = _training_code_of(tool) if tool else None  # what that commit's tool digested
        texts = {f: git("show", f"{rev}:{f}") for f in code or ()}
        if not code or None in texts.values():
            continue
        try:
            if _digest(texts, code) == digest:
                return rev
        except (SyntaxError, KeyError):
            continue
    return None


def provenance(device):
    head = git("rev-parse", "HEAD")
    # the code's state: the committed runs in book/data change as they train
    status = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!book/data")
    commit = "unknown" if head is None else head.strip()
    dirty = None if head is None else bool((status or "").strip())
    name = platform.processor()
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
    elif Path("/proc/cpuinfo").exists():
        name = next(
            (
                line.split(":", 1)[1].strip()
                for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")
            ),
            name,
        )
    return {
        "commit": commit,
        "dirty": dirty,
        "code_sha256": code_hash(),
        "device": f"{device.type}: {name}",
        "torch": torch.__version__,
        "python": platform.python_version(),
        "threads": torch.get_num_threads(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def _save_atomic(obj, path: Path, *, as_json=False):
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    if as_json:
        tmp.write_text(json.dumps(obj, separators=(",", ":")))
    else:
        torch.save(obj, tmp)
    os.replace(tmp, path)


def _rounded(x, digits=6):
    if isinstance(x, float):
        return float(f"{x:.{digits}g}")
    if isinstance(x, list):
        return [_rounded(v, digits) for v in x]
    if isinstance(x, dict):
        return {k: _rounded(v, digits) for k, v in x.items()}
    return x


def run(
    L,
    settings=None,
    *,
    out=ROOT / "_build" / "paper-experiment",
    device="cpu",
    progress=True,
    checkpoint_every=1_000,
    stop_after=None,
):
    """Train (or resume) the experiment at prompt length ``L``; returns the per-length result dict.

    ``settings``: overrides of the intended protocol's settings (:func:`settings_of`). ``stop_after``: stop (after checkpointing) once this many
    steps are done in total, as an interruption would (for the resume test)."""
    from tqdm.auto import tqdm

    settings = {**settings_of(_experiment().INTENDED), **(settings or {})}
    protocol = _experiment().Protocol.from_settings(settings)
    device = torch.device(device)
    out = Path(out)
    ckpt_path, json_path = out / "checkpoints" / f"L{L:04d}.pt", out / f"L{L:04d}.json"
    sampler = protocol.sampler(L, device=device)
    stream = protocol.stream(device=device)
    models = {m.kind: m for m in protocol.initial_models(device=device)}
    kinds = list(models)
    history = {
        "steps": [],
        "test_mse": {k: [] for k in kinds},
        "train_loss": {k: [] for k in kinds},
    }
    step, wall, block, block_n, baselines, segments = 0, 0.0, None, 0, None, []
    if ckpt_path.exists():
        ck = torch.load(ckpt_path, weights_only=False)
        if ck["settings"] != settings:
            raise SystemExit(
                f"{ckpt_path} was written with other settings: {ck['settings']}; delete it"
            )
        step, wall, history, baselines = ck["step"], ck["wall"], ck["history"], ck["baselines"]
        block, block_n, segments = ck["block"], ck["block_n"], ck.get("segments", [])
        for k in kinds:
            for w, saved in zip(models[k].parameters(), ck["models"][k]):
                w.copy_(saved)
        stream.set_state(ck["stream"])
    if baselines is None:
        # the data's own baselines (the model-dependent statistics are in "final")
        start = evaluate(models, settings, L, device, baselines=True)
        baselines = {k: start[k] for k in ("bayes", "bayes_se", "ridge", "ridge_se")}
    # Once per process, before training: the commit and code that run (later edits don't count).
    # A run resumed from its checkpoint adds a segment: which code took it from which step to which.
    prov = provenance(device)
    segments.append(
        {
            **{k: prov[k] for k in ("commit", "dirty", "code_sha256", "device", "date")},
            "from_step": step,
            "to_step": step,
        }
    )

    def record(s):
        history["steps"].append(s)
        ev = evaluate(models, settings, L, device)
        for k in kinds:
            history["test_mse"][k].append(ev["mse"][k])
            history["train_loss"][k].append(
                None if block is None else (block[k] / block_n).tolist()
            )

    def write(complete):
        final = evaluate(models, settings, L, device, baselines=True) if complete else {}
        result = {
            "L": L,
            "settings": settings,
            "complete": complete,
            "steps_done": step,
            "provenance": {**prov, "wall_seconds": round(wall, 1), "segments": segments},
            "baselines": _rounded(baselines),
            "history": _rounded(history),
            "final": _rounded(final),
        }
        if complete:
            result["final"]["key_query"] = {
                k: _rounded(m.key_query().tolist(), 5) for k, m in models.items()
            }
            result["final"]["output_value"] = {
                k: _rounded(m.readout().tolist(), 5) for k, m in models.items()
            }
        _save_atomic(result, json_path, as_json=True)
        return result

    if step == 0:
        record(0)
    steps = settings["steps"]
    bar = tqdm(total=steps, initial=step, disable=not progress, desc=f"L={L}", mininterval=5)
    t0, result, done = time.perf_counter(), None, step
    for step, losses in _experiment().sgd_run(
        [models[k] for k in kinds], sampler, stream, settings["lr"], steps, done=done
    ):
        if block is None:
            block, block_n = {k: torch.zeros_like(v) for k, v in zip(kinds, losses)}, 0
        for k, v in zip(kinds, losses):
            block[k] += v
        block_n += 1
        bar.update(1)
        if step == FIRST_BLOCK:
            # full precision
            history["first_block"] = {k: (block[k] / block_n).tolist() for k in kinds}
        if step % settings["record_every"] == 0 or step == FIRST_BLOCK or step == steps:
            if not all(math.isfinite(x) for k in kinds for x in (block[k] / block_n).tolist()):
                raise SystemExit(f"L={L}: training diverged before step {step}")
            record(step)
            block, block_n = None, 0
        if step % checkpoint_every == 0 or step == steps or step == stop_after:
            wall += time.perf_counter() - t0
            t0 = time.perf_counter()
            segments[-1]["to_step"] = step
            _save_atomic(
                {
                    "settings": settings,
                    "step": step,
                    "wall": wall,
                    "history": history,
                    "baselines": baselines,
                    "block": block,
                    "block_n": block_n,
                    "models": {k: [w.clone() for w in m.parameters()] for k, m in models.items()},
                    "stream": stream.get_state(),
                    "segments": segments,
                },
                ckpt_path,
            )
            if step % settings["record_every"] == 0 or step == FIRST_BLOCK or step == steps:
                result = write(step == steps)
        if step == stop_after:
            break
    bar.close()
    return result if result is not None else json.loads(json_path.read_text())


#: The committed runs: per setting, each length's full result file and, while it is not complete, its
#: checkpoint (small: the 2S models, the stream's state and the history), so that a later session
#: resumes what an earlier one started (``--out`` defaults here).
RUNS = ROOT / "book" / "data" / "paper_runs"


def setting_name(settings):
    """``"released"`` for the authors' generator with separate starts, else ``"intended"``."""
    return "released" if settings["released"] else "intended"


def settledness(steps, losses, *, last=0.2, z=3.0):
    """Has each start stopped moving? Per start, the least-squares trend of its recorded losses over the
    last fifth of the run (``last``), as the change it makes over that stretch, with the standard error
    the scatter of the recorded values about the trend gives it; settled when ``|change| < z SE``.

    steps (n,), losses (n, S): the records (block means of the train loss, or test errors).
    Returns a dict of lists (S,): change, change_se, settled.
    """
    import numpy as np

    steps, losses = np.asarray(steps, float), np.asarray(losses, float)
    tail = steps >= steps[-1] * (1 - last)
    t, y = steps[tail], losses[tail]
    t = t - t.mean()
    slope = (t[:, None] * (y - y.mean(0))).sum(0) / (t * t).sum()
    resid = y - y.mean(0) - slope * t[:, None]
    slope_se = np.sqrt((resid**2).sum(0) / (len(t) - 2) / (t * t).sum())
    span = steps[-1] * last
    change, se = slope * span, slope_se * span
    return {
        "change": _rounded(change.tolist(), 4),
        "change_se": _rounded(se.tolist(), 3),
        "settled": (np.abs(change) < z * se).tolist(),
    }


def compact(res):
    """One length's result for the committed file (the whole file stays under 400 KB): the test MSE and
    each start's train loss (block means) every 20 000 steps and at step 1 000, the first block's train
    loss in full, each start's settledness (on the train loss at every record, before thinning), the
    effective matrices to 4 digits, and the commit that holds the code of each segment of the run."""
    res = json.loads(json.dumps(res))  # a copy
    prov = res["provenance"]
    for seg in prov.get("segments", []):
        if seg.get("code_sha256") and "code_commit" not in seg:
            seg["code_commit"] = _commit_with_code(seg["code_sha256"])
    if "code_commit" not in prov:
        # the commit that holds exactly the code that ran (None: not committed)
        prov["code_commit"] = _commit_with_code(prov["code_sha256"])
    hist = res["history"]
    if "train_loss" in hist:
        rows = [
            i for i, s in enumerate(hist["steps"]) if hist["train_loss"]["softmax"][i] is not None
        ]
        res["settled"] = {
            k: settledness([hist["steps"][i] for i in rows], [v[i] for i in rows])
            for k, v in hist["train_loss"].items()
        }
        res["settled"]["on"] = f"train loss, block means of {res['settings']['record_every']} steps"
    keep = [i for i, s in enumerate(hist["steps"]) if s % 20_000 == 0 or s == FIRST_BLOCK]
    hist["steps"] = [hist["steps"][i] for i in keep]
    for key in ("test_mse", "train_loss"):
        if key in hist:
            hist[key] = {k: [_rounded(v[i], 5) for i in keep] for k, v in hist[key].items()}
    for key in ("key_query", "output_value"):
        res["final"][key] = _rounded(res["final"][key], 4)
    return res


def merge(outs=None, target=RESULTS):
    """Update the committed results file with every complete per-length result found under ``outs``
    (default: the committed runs of both settings and the two ``_build`` folders); a length already in
    the file is replaced by a newer complete run of the same setting, the others are kept. Runs in the
    file without a settledness record get one from their test MSE history (every 20 000 steps).
    Returns the file's size in bytes."""
    outs = outs or [RUNS / "intended", RUNS / "released"] + [
        ROOT / "_build" / f"paper-experiment{x}" for x in ("", "-released")
    ]
    target = Path(target)
    doc = json.loads(target.read_text()) if target.exists() else {"lengths": []}
    entries = {(setting_name(r["settings"]), r["L"]): r for r in doc["lengths"]}
    for out in outs:
        for f in sorted(Path(out).glob("L*.json")):
            res = json.loads(f.read_text())
            key = (setting_name(res["settings"]), res["L"])
            old = entries.get(key, {}).get("provenance", {}).get("date", "")
            if res["complete"] and res["provenance"]["date"] >= old:
                entries[key] = compact(res)
    for r in entries.values():
        if "settled" not in r:
            h = r["history"]
            rows = [i for i, s in enumerate(h["steps"]) if s % 20_000 == 0]
            r["settled"] = {
                k: settledness([h["steps"][i] for i in rows], [v[i] for i in rows])
                for k, v in h["test_mse"].items()
            }
            r["settled"]["on"] = (
                "test MSE every 20000 steps (this run's train losses were not kept)"
            )
    doc = {
        "description": "Chapter 5, the paper's experiment at its own scale (tools/paper_experiment.py)",
        "lengths": sorted(entries.values(), key=lambda r: (r["settings"]["released"], r["L"])),
    }
    _save_atomic(doc, target, as_json=True)
    return target.stat().st_size


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--L", type=int, action="append", help="prompt length (repeat for several; all 19 if none)"
    )
    intended = _experiment().INTENDED
    ap.add_argument("--starts", type=int, default=intended.starts)
    ap.add_argument("--steps", type=int, default=intended.steps)
    ap.add_argument("--seed", type=int, default=intended.seed)
    ap.add_argument("--released", action="store_true", help="the authors' released data generator")
    ap.add_argument(
        "--different-starts", action="store_true", help="separate starts for the linear models"
    )
    ap.add_argument("--device", default="cpu")
    ap.add_argument(
        "--out", type=Path, help="where the runs go (default: book/data/paper_runs/<setting>)"
    )
    ap.add_argument(
        "--merge", action="store_true", help="merge the per-length results into --target"
    )
    ap.add_argument("--target", type=Path, default=RESULTS)
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    if args.merge:
        size = merge([args.out] if args.out else None, args.target)
        print(f"wrote {args.target} ({size / 1024:.0f} KiB)")
        return 0
    torch.set_num_threads(1)
    settings = {
        "starts": args.starts,
        "steps": args.steps,
        "seed": args.seed,
        "released": args.released,
        "different_starts": args.different_starts,
    }
    out = args.out or RUNS / setting_name(settings)
    for L in args.L or intended.lengths:
        res = run(L, settings, out=out, device=args.device, progress=not args.no_progress)
        mse = {k: sum(v) / len(v) for k, v in res["final"]["mse"].items()}
        print(
            f"L={L}: test MSE softmax {mse['softmax']:.4f}, linear {mse['linear']:.4f}, Bayes "
            f"{res['baselines']['bayes']:.4f}; {res['provenance']['wall_seconds']:.0f} s",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
