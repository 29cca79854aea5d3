#!/usr/bin/env python
"""Stage, execute and build the book (README: "The two commands").

0. Make sure the vendored MathJax files are in ``book/_vendor`` (tools/fetch_vendor.py;
   cached, so offline after the first time).
1. Copy ``_config.yml``, ``_toc.yml`` and ``book/`` into a staging folder (default ``_build/stage``).
2. Execute every notebook chapter of ``_toc.yml`` with papermill, injecting ``mode`` and ``device`` into the
   cell tagged ``parameters``; the injected cell is tagged ``remove-cell``. The executed ``.ipynb`` replaces
   the staged ``.md``. The kernels get ``SOFTLIN_STATIC_EXPLORERS=1``, so that every explorer draws all
   its pictures for the static page (``softlin.book.widgets.explorer``). Each cell may run for at most
   ``CELL_TIMEOUT[mode]`` seconds: a hung cell fails the build with the chapter, the cell and its first line.
   With ``--exercise-checks`` every exercise self-check is also tried on its folded solution and on a
   wrong answer (``tools/exercise_checks.py``; hidden cells, read by ``tests/test_exercises.py``).
3. Write the status page (execution time of every chapter, package versions) into the stage.
4. Turn execution off in the staged config and run ``jupyter-book build -W --keep-going`` on the stage.
5. Convert the site's downloadable notebooks (``_sources/**.ipynb``) for plain front ends, as Colab's
   (``tools/colab_notebooks.py``): *Download .ipynb* gives no MyST markup, with the outputs.
6. Build the lessons' slide decks from the executed lessons into the site (``tools/slides.py``).
7. Put the problem sets' student versions (no solutions, no hidden tests) into the site's
   ``problem-sets/`` and list them on the instructor page (``tools/problem_sets.py``'s ``publish``).

Every kernel talks to papermill over IPC (:class:`LocalKernelManager`), not TCP on localhost.

Any failing cell or any Sphinx warning makes this script exit non-zero. Usage::

    python tools/build_book.py --mode default -j 2       # what `make book` runs (and `make test`)
    python tools/build_book.py --mode fast -j 2 --no-html --exercise-checks   # `make test`, fast part
    python tools/build_book.py --mode fast --only 02_infinite_prompt_limit --no-html
    python tools/build_book.py --root tests/fixtures/minibook ...   # another book (the tests' fixtures)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from importlib import metadata
from multiprocessing import get_context
from pathlib import Path

import yaml
from jupyter_client.manager import AsyncKernelManager
from softlin.book.modes import MODES
from traitlets import default

sys.path.insert(0, str(Path(__file__).resolve().parent))
import exercise_checks
import fetch_vendor

ROOT = Path(__file__).resolve().parents[1]
VERSIONED = [
    "torch",
    "numpy",
    "scipy",
    "matplotlib",
    "ipywidgets",
    "jupyter-book",
    "sphinx",
    "myst-nb",
    "sphinx-proof",
    "sphinx-exercise",
    "jupytext",
    "papermill",
    "nbclient",
    "ipykernel",
    "softlin",
]


def toc_files(toc_path: Path) -> list[str]:
    """All ``file:`` entries of a jb-book ``_toc.yml``, root first, in reading order."""
    toc = yaml.safe_load(toc_path.read_text())
    out = [toc["root"]]

    def walk(node):
        if isinstance(node, dict):
            if "file" in node:
                out.append(node["file"])
            for key in ("parts", "chapters", "sections"):
                for child in node.get(key, []) or []:
                    walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk(toc)
    return out


def is_notebook_source(md: Path) -> bool:
    """A MyST markdown file is a notebook when its front matter declares a kernelspec."""
    text = md.read_text()
    if not text.startswith("---"):
        return False
    front = text.split("---", 2)[1]
    return "kernelspec:" in front


def notebook_chapters(root: Path = ROOT) -> list[Path]:
    """The notebook pages (``.md`` with a kernelspec) listed in ``_toc.yml``, in reading order: the
    lessons ``book/NN_*.md``, their labs ``book/labs/NN_*.md`` and the appendix notebooks."""
    chapters = []
    for f in toc_files(root / "_toc.yml"):
        md = root / (f + ".md")
        if md.exists() and is_notebook_source(md):
            chapters.append(md)
    return chapters


def page_name(md) -> str:
    """A page's name inside ``book/``, without suffix: ``01_measure_view`` for a lesson,
    ``labs/01_measure_view`` for its lab (a page in a ``labs/`` folder). The build's records, ``--only``
    and ``tools/run_seeds.py`` name pages so."""
    md = Path(md)
    return f"labs/{md.stem}" if md.parent.name == "labs" else md.stem


def is_lesson(md: Path) -> bool:
    """A lesson is a numbered notebook page directly in ``book/`` (``book/NN_name.md``)."""
    return Path(md).parent.name == "book" and re.match(r"\d\d_", Path(md).stem) is not None


def is_lab(md: Path) -> bool:
    """A lab is a numbered notebook page in ``book/labs/`` (``book/labs/NN_name.md``), the lab of the
    lesson with the same name."""
    return Path(md).parent.name == "labs" and re.match(r"\d\d_", Path(md).stem) is not None


def lessons(root: Path = ROOT) -> list[Path]:
    """The lessons of ``_toc.yml``, in reading order."""
    return [md for md in notebook_chapters(root) if is_lesson(md)]


def labs(root: Path = ROOT) -> list[Path]:
    """The labs of ``_toc.yml``, in the order of their lessons."""
    return [md for md in notebook_chapters(root) if is_lab(md)]


def lab_of(lesson: Path) -> Path:
    """Where the lab of ``lesson`` lives: ``book/labs/<the lesson's file name>``."""
    return Path(lesson).parent / "labs" / Path(lesson).name


# Seconds one cell may run, per mode, so that a hung cell fails the build within 5 minutes, naming the
# chapter and the cell. Derivation: the slowest cell measured in each mode (papermill's cell durations;
# tests/test_timeouts.py prints them) times MARGIN = 3 for slower machines and heavier load: the slowest
# cell is chapter 5's training of eight starts at seven prompt lengths, 19.5 s in fast mode under load and
# 79 s in default mode (two chapters at a time on the 2-core machine, one thread each; 88.5 s with extra
# load). Default mode gets 270 s (cells up to 90 s), the most that still fails a hang within 5 minutes with
# the kernel's start and stop; fast mode gets 180 s (cells up to 60 s: on a 2.0 GHz Xeon core the
# exercise harness of chapter 5, every exercise tried twice in one cell, took 29.5-49 s in fast mode). tests/test_timeouts.py fails when
# a real cell takes more than 1/MARGIN of its limit. Paper mode runs for hours and has no limit.
MARGIN = 3
CELL_TIMEOUT = {"fast": 180, "default": 270, "paper": None}


def cell_timeout(mode: str) -> int | None:
    """Seconds one cell may run in ``mode`` (``SOFTLIN_CELL_TIMEOUT`` overrides it, e.g. for a test)."""
    override = os.environ.get("SOFTLIN_CELL_TIMEOUT")
    return int(override) if override else CELL_TIMEOUT[mode]


def failed_cell(path: Path) -> str:
    """'cell N (`first line`)' of the cell that failed or timed out in an executed notebook, or ''."""
    try:
        nb = nbformat_read(path)
    except Exception:  # noqa: BLE001 (a half-written notebook: the caller reports the failure itself)
        return ""
    code = [(i, cell) for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]
    failed = [
        (i, cell)
        for i, cell in code
        if any(o.get("output_type") == "error" for o in cell.get("outputs", []))
    ]
    # a cell that timed out has no error output: it is the last one papermill started
    started = [
        (i, cell) for i, cell in code if cell.metadata.get("papermill", {}).get("start_time")
    ]
    for i, cell in (failed or started[-1:])[:1]:
        first = next((line for line in cell.source.splitlines() if line.strip()), "")
        return f"cell {i} (`{first[:70]}`)"
    return ""


class LocalKernelManager(AsyncKernelManager):
    """The kernel manager of every notebook the book runs: the kernel talks to its client over IPC
    (Unix sockets in Jupyter's private runtime folder) instead of TCP on localhost. Over TCP without
    CurveZMQ keys ipykernel warns, once per kernel, that the traffic is unencrypted; a kernel that runs on
    the same machine as its client needs no network at all, so the warning's cause is removed rather
    than the warning filtered. Pass it as ``kernel_manager_class`` to papermill or nbclient."""

    @default("transport")
    def _default_transport(self):
        import zmq

        return "ipc" if zmq.has("ipc") else "tcp"  # ZeroMQ has no IPC transport on Windows

    async def _async_interrupt_kernel(self):
        """No SIGINT on the way out: jupyter_client interrupts a kernel before asking it to shut down, and
        a kernel that is still answering papermill's last message logs that signal as "ERROR |
        KeyboardInterrupt caught in kernel" on the build's console. A notebook that has finished runs no
        code, so there is nothing to interrupt; a cell that times out is still interrupted."""
        if self.shutting_down:
            return
        await super()._async_interrupt_kernel()

    def _ip_default(self):
        """The sockets' path prefix: unique per kernel, in Jupyter's runtime folder. (jupyter_client's
        default, without a connection file yet, is ``kernel-ipc`` in the working folder: two kernels
        started there at once, as ``-j 2`` does, would share sockets and read each other's messages.)"""
        if self.transport != "ipc":
            return super()._ip_default()
        import uuid

        from jupyter_core.paths import jupyter_runtime_dir

        os.makedirs(jupyter_runtime_dir(), exist_ok=True)
        return os.path.join(jupyter_runtime_dir(), f"kernel-{uuid.uuid4().hex[:16]}-ipc")


def nbformat_read(path):
    import nbformat

    return nbformat.read(str(path), as_version=4)


def strip_unused_widget_state(nb) -> None:
    """Drop the saved ipywidgets state when no output displays a widget: controls created only to be read
    (a static explorer's sliders) would otherwise make the page load the 3.6 MB widget manager."""
    views = any(
        "application/vnd.jupyter.widget-view+json" in o.get("data", {})
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
    )
    if not views:
        nb.metadata.pop("widgets", None)


def keep_image_widths_only(nb) -> int:
    """Show every high-resolution figure at its logical width, scaled whole; return how
    many outputs changed.

    The lessons' figures are 2x PNGs (``use_book_style``: IPython's ``retina`` format),
    whose metadata holds their logical ``width`` and ``height``. myst-nb writes both
    into the ``<img>``'s inline style, and a fixed height would stretch a figure that
    the page's CSS (``max-width: 100%``) narrows on a phone: the ``height`` is dropped,
    and the site shows the figure at its logical width and scales it whole (Jupyter
    does the same). An image with a width would also become a link to its PNG (Sphinx's
    ``html_scaled_image_link``), which the reader's overlay skips: the cell's images get
    Sphinx's ``no-scaled-link`` class, so that a tap opens the figure in the overlay."""
    changed = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        sized = False
        for o in cell.get("outputs", []):
            shown = o.get("metadata", {}).get("image/png", {})
            if "width" in shown:
                sized = True
                if "height" in shown:
                    del shown["height"]
                    changed += 1
        if sized:
            image = cell.metadata.setdefault("mystnb", {}).setdefault("image", {})
            classes = str(image.get("classes", "")).split()
            if "no-scaled-link" not in classes:
                image["classes"] = " ".join([*classes, "no-scaled-link"])
    return changed


def use_static_explorer() -> None:
    """Put ``book/_ext`` (the explorers' static-frame builder) on the ``PYTHONPATH`` kernels inherit."""
    ext = str(ROOT / "book" / "_ext")
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if ext not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([ext, *filter(None, paths)])


def execute_one(
    md_path: str,
    out_path: str,
    mode: str,
    device: str,
    threads: int,
    extra: dict | None = None,
    try_exercises: bool = False,
) -> dict:
    """Execute one chapter with papermill (``extra``: more parameters, e.g. ``{"seed": 3}``); return its
    timing record. Runs in a worker process."""
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    os.environ.setdefault("MKL_NUM_THREADS", str(threads))
    os.environ.setdefault("SOFTLIN_STATIC_EXPLORERS", "1")  # the kernel inherits it
    # no progress bars in a page (softlin._progress): the same output on every run
    os.environ.setdefault("SOFTLIN_PROGRESS", "0")
    use_static_explorer()
    import jupytext
    import nbformat
    import papermill

    nb = jupytext.read(md_path)
    nb.metadata.pop("jupytext", None)
    nb.metadata["kernelspec"] = {
        "display_name": "Python 3",
        "language": "python",
        "name": "python3",
    }
    n_checks = exercise_checks.inject(nb) if try_exercises else 0
    t0 = time.perf_counter()
    error = None
    timeout = cell_timeout(mode)
    try:
        papermill.execute_notebook(
            nb,
            out_path,
            parameters={"mode": mode, "device": device, **(extra or {})},
            cwd=str(Path(out_path).parent),
            kernel_name="python3",
            kernel_manager_class=LocalKernelManager,
            progress_bar=False,
            log_output=False,
            execution_timeout=timeout,
        )
    # papermill raises PapermillExecutionError with the cell traceback; any failure is recorded
    except Exception as exc:  # noqa: BLE001
        error = f"{type(exc).__name__}: {exc}"
        where = failed_cell(Path(out_path)) if Path(out_path).exists() else ""
        if "timed out" in str(exc) or "Timeout" in type(exc).__name__:
            error = (
                f"{page_name(md_path)}: {where or 'a cell'} ran longer than {timeout} s ({mode} mode)\n"
                + error
            )
        elif where:
            error = f"{page_name(md_path)}: {where} failed\n" + error
    seconds = time.perf_counter() - t0
    slowest = None
    if Path(out_path).exists():
        out = nbformat.read(out_path, as_version=4)
        for i, cell in enumerate(out.cells):
            tags = cell.metadata.get("tags", [])
            if "injected-parameters" in tags and "remove-cell" not in tags:
                cell.metadata["tags"] = tags + ["remove-cell"]
            duration = cell.metadata.get("papermill", {}).get("duration")
            if (
                cell.cell_type == "code"
                and duration is not None
                and (slowest is None or duration > slowest[0])
            ):
                slowest = (
                    round(duration, 2),
                    i,
                    next((x for x in cell.source.splitlines() if x.strip()), "")[:70],
                )
        strip_unused_widget_state(out)
        keep_image_widths_only(out)
        record = out.metadata.get("papermill", {})
        if not isinstance(record.get("input_path", ""), str):
            # papermill records the notebook object it was handed as its "input path": a second copy of
            # the page, solutions and injected exercise checks included, that the site's download and a
            # student's copy would carry. The source file's name is what the record means.
            record["input_path"] = f"book/{page_name(md_path)}.md"
        nbformat.write(out, out_path)
    return {
        "chapter": page_name(md_path),
        "seconds": round(seconds, 2),
        "error": error,
        "slowest_cell": slowest,
        "timeout": timeout,
        "exercise_checks": n_checks,
    }


def versions() -> dict:
    out = {"python": platform.python_version()}
    for name in VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def chapter_title(md: Path) -> str:
    for line in md.read_text().splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return md.stem


def seed_section() -> list[str]:
    """The status page's table of the committed seed record (``book/data/seed_record.json``, written by
    ``tools/run_seeds.py --record``): per page and mode, at how many seeds all the page's checks held."""
    from softlin._data import seed_ranges

    path = ROOT / "book" / "data" / "seed_record.json"
    if not path.exists():
        return []
    pages = json.loads(path.read_text())["pages"]
    lines = [
        "## Seeds",
        "",
        "Every check of a page must hold whatever `seed` a reader sets in its parameters cell. "
        "`tools/run_seeds.py --record` executes pages at several seeds and keeps, per run, whether all "
        "the page's checks held, in `book/data/seed_record.json`. The commit column says where each page "
        "was swept: a page is swept again when its code changes, so one whose later changes were prose, "
        "captions or tables keeps its earlier record.",
        "",
        "| page | mode | all checks held | seeds | commit |",
        "|---|---|---:|---|---|",
    ]
    for page in sorted(pages, key=lambda p: (p.removeprefix("labs/"), p.startswith("labs/"))):
        for mode, runs in sorted(pages[page].items()):
            held = sum(run["passed"] for run in runs.values())
            seeds = seed_ranges(runs)
            commits = ", ".join(sorted({run["commit"] for run in runs.values()}))
            lines.append(f"| {page} | {mode} | {held} of {len(runs)} | {seeds} | `{commits}` |")
    return lines + [""]


def write_status(
    stage: Path,
    records: list[dict],
    mode: str,
    jobs: int,
    titles: dict,
    wall_seconds: float | None = None,
) -> None:
    """Fill the staged ``book/status.md`` with this build's timings and versions."""
    total = sum(r["seconds"] for r in records)
    wall = (
        ""
        if wall_seconds is None
        else (f" Executing all of them took **{wall_seconds:.0f} s** of wall-clock time.")
    )
    lines = [
        "# Build status",
        "",
        f"This page was generated when the book was built, on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"in **`{mode}` mode** with {jobs} notebook(s) executed at a time on a machine with "
        f"{os.cpu_count()} CPU core(s) ({platform.machine()}). Times are papermill wall-clock seconds per "
        "chapter, kernel start included; with more than one notebook at a time they share the cores. "
        f"A cell may run for at most {records[0]['timeout'] if records else '?'} s in this mode."
        + wall,
        "",
        "| chapter | seconds | slowest cell (s) | result |",
        "|---|---:|---:|---|",
    ]
    for r in records:
        ok = "ran" if r["error"] is None else "**failed**"
        slow = f"{r['slowest_cell'][0]:.1f}" if r.get("slowest_cell") else ""
        lines.append(
            f"| {{doc}}`{titles[r['chapter']]} <{r['chapter']}>` | {r['seconds']:.1f} | {slow} | {ok} |"
        )
    lines += [f"| **all chapters** | **{total:.1f}** | | |", ""]
    lines += seed_section()
    lines += [
        "## Package versions",
        "",
        "| package | version |",
        "|---|---|",
    ]
    lines += [f"| {k} | {v} |" for k, v in versions().items()]
    lines += [
        f"| {spec.rsplit('@', 1)[0]} (JavaScript, served by this site) | {spec.rsplit('@', 1)[1]} |"
        for spec in fetch_vendor.PACKAGES
    ]
    lines.append("")
    (stage / "book" / "status.md").write_text("\n".join(lines))
    (stage / "status.json").write_text(
        json.dumps(
            {
                "mode": mode,
                "jobs": jobs,
                "wall_seconds": wall_seconds,
                "chapters": records,
                "versions": versions(),
            },
            indent=1,
        )
    )


# The run-time sentence of a chapter's opening box, as written in its source. In the staged, executed
# notebook it is replaced by the time this build measured, so the box states what was measured; in
# Jupyter or Colab the source sentence reads naturally as it is.
RUN_TIME_SOURCE = "see the {doc}`status` page"


def run_time_sentence(record: dict, mode: str, jobs: int) -> str:
    """The measured replacement of RUN_TIME_SOURCE for one chapter's record."""
    seconds = record["seconds"]
    spent = f"{seconds:.0f} s" if seconds < 100 else f"about {seconds / 60:.1f} minutes"
    cores = os.cpu_count() or 1
    # the mode and the number of chapters run at once are on the status page, for those who need them
    return (
        f"{spent} when this site was built ({cores} CPU core{'s' if cores > 1 else ''}, "
        + "more on a busy machine; the {doc}`status` page has every chapter's)"
    )


def stamp_run_times(stage: Path, records: list[dict], mode: str, jobs: int) -> None:
    """Write each chapter's measured execution time into its staged, executed notebook."""
    for r in records:
        path = stage / "book" / (r["chapter"] + ".ipynb")
        if r["error"] is not None or not path.exists():
            continue
        nb = json.loads(path.read_text())
        changed = False
        for cell in nb["cells"]:
            if cell["cell_type"] != "markdown":
                continue
            text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            if RUN_TIME_SOURCE in text:
                cell["source"] = text.replace(RUN_TIME_SOURCE, run_time_sentence(r, mode, jobs))
                changed = True
        if changed:
            path.write_text(json.dumps(nb, indent=1, ensure_ascii=False))


def stage_config(stage: Path) -> None:
    cfg_path = stage / "_config.yml"
    cfg = yaml.safe_load(cfg_path.read_text())
    cfg["execute"]["execute_notebooks"] = "off"
    cfg["exclude_patterns"] = [p for p in cfg["exclude_patterns"] if not p.endswith(".ipynb")]
    cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))


def previous_seconds(stage: Path, mode: str) -> dict[str, float]:
    """Seconds per page of the last build in ``stage`` if it ran in ``mode`` (else empty)."""
    try:
        status = json.loads((stage / "status.json").read_text())
    except (OSError, ValueError):
        return {}
    if status.get("mode") != mode:
        return {}
    return {r["chapter"]: r["seconds"] for r in status.get("chapters", [])}


def report(record: dict) -> None:
    slow = record["slowest_cell"]
    slowest = f"; slowest cell {slow[1]}: {slow[0]:.1f} s" if slow else ""
    print(
        f"[{record['seconds']:7.1f} s] {record['chapter']}{slowest}"
        f"{'  FAILED' if record['error'] else ''}",
        flush=True,
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--mode", choices=MODES, default="default")
    ap.add_argument("--device", default="cpu", help="injected into every chapter ('cpu' or 'cuda')")
    ap.add_argument("--stage", type=Path, default=ROOT / "_build" / "stage")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="notebooks executed at a time")
    ap.add_argument(
        "--only", nargs="*", default=None, help="chapter stems to execute (others are skipped)"
    )
    ap.add_argument("--no-html", action="store_true", help="execute only; skip the Sphinx build")
    ap.add_argument(
        "--exercise-checks",
        action="store_true",
        help="also try every exercise self-check on its solution and a wrong answer (hidden cells)",
    )
    ap.add_argument(
        "--cell-timeout",
        type=int,
        default=None,
        help=f"seconds per cell (default per mode: {CELL_TIMEOUT})",
    )
    ap.add_argument(
        "--root",
        type=Path,
        default=ROOT,
        help="the book to build: a folder with _config.yml, _toc.yml and book/ (default: this one)",
    )
    args = ap.parse_args(argv)
    if args.cell_timeout is not None:
        os.environ["SOFTLIN_CELL_TIMEOUT"] = str(
            args.cell_timeout
        )  # the worker processes inherit it
    root = args.root.resolve()
    # Explorers draw every picture for a site, or only check their controls when no site is built; the
    # worker processes (and their kernels) inherit the variable.
    os.environ.setdefault("SOFTLIN_STATIC_EXPLORERS", "check" if args.no_html else "1")

    fetch_vendor.ensure()
    stage = args.stage.resolve()
    previous = previous_seconds(stage, args.mode)
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir(parents=True)
    shutil.copy2(root / "_config.yml", stage / "_config.yml")
    shutil.copy2(root / "_toc.yml", stage / "_toc.yml")
    shutil.copytree(
        root / "book",
        stage / "book",
        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "*.ipynb"),
    )
    for shared in ("_vendor", "_ext"):  # another book borrows this one's served files and extension
        if not (stage / "book" / shared).exists():
            shutil.copytree(ROOT / "book" / shared, stage / "book" / shared)
    stage_config(stage)

    chapters = notebook_chapters(root)
    if args.only:
        known = [page_name(c) for c in chapters]
        unknown = set(args.only) - set(known)
        if unknown:
            ap.error(f"--only names unknown pages {sorted(unknown)}; known: {known}")
        chapters = [c for c in chapters if page_name(c) in args.only]
    titles = {page_name(c): chapter_title(c) for c in notebook_chapters(root)}
    threads = max(1, (os.cpu_count() or 1) // max(1, args.jobs))
    jobs = [
        (
            str(c),
            str(stage / "book" / (page_name(c) + ".ipynb")),
            args.mode,
            args.device,
            threads,
            None,
            args.exercise_checks,
        )
        for c in chapters
    ]

    # the longest pages first (by the last build of this stage in this mode), so that two at a time
    # finish together
    jobs.sort(key=lambda j: -previous.get(page_name(j[0]), 0.0))
    t0 = time.perf_counter()
    records = []
    if args.jobs > 1 and len(jobs) > 1:
        with ProcessPoolExecutor(max_workers=args.jobs, mp_context=get_context("spawn")) as pool:
            futures = [pool.submit(execute_one, *j) for j in jobs]
            for fut in as_completed(futures):
                records.append(fut.result())
                report(records[-1])
    else:
        for j in jobs:
            records.append(execute_one(*j))
            report(records[-1])
    order = {page_name(c): i for i, c in enumerate(chapters)}
    records.sort(key=lambda r: order[r["chapter"]])
    wall_seconds = round(time.perf_counter() - t0, 1)
    print(
        f"executed {len(records)} chapter(s) in {wall_seconds:.1f} s (mode={args.mode})", flush=True
    )
    for c in chapters:
        staged_md = stage / "book" / (page_name(c) + ".md")
        if (stage / "book" / (page_name(c) + ".ipynb")).exists():
            staged_md.unlink()
    write_status(stage, records, args.mode, args.jobs, titles, wall_seconds)
    stamp_run_times(stage, records, args.mode, args.jobs)

    failed = [r for r in records if r["error"]]
    for r in failed:
        print(f"\nFAILED: {r['chapter']}\n{r['error']}", file=sys.stderr)
    if failed:
        return 1
    if args.no_html:
        return 0
    jb = Path(sys.executable).parent / "jupyter-book"
    cmd = [str(jb) if jb.exists() else "jupyter-book", "build", "-W", "--keep-going", str(stage)]
    t1 = time.perf_counter()
    rc = subprocess.call(cmd)
    print(
        f"jupyter-book build: rc={rc} in {time.perf_counter() - t1:.1f} s; site: {stage / '_build' / 'html'}"
    )
    if rc == 0:
        # The site's "Download .ipynb" gives what Colab opens (tools/colab_notebooks.py), with outputs.
        import colab_notebooks

        try:
            done = colab_notebooks.convert_site_downloads(root, stage / "_build" / "html")
        except (KeyError, ValueError) as exc:
            print(
                f"the site's downloadable notebooks could not be converted: {exc}", file=sys.stderr
            )
            return 1
        print(f"converted the site's {len(done)} downloadable notebook(s) for plain front ends")
    if rc == 0 and root == ROOT:  # the lessons' slide decks, from this build's executed lessons
        import slides

        stems = [s for s in (args.only or []) if (slides.OUTLINES / f"{s}.yml").exists()]
        if args.only is None or stems:
            rc = slides.main(["--stage", str(stage), *(["--only", *stems] if stems else [])])
    if rc == 0 and root == ROOT:  # the problem sets' student versions, for download
        import problem_sets

        t2 = time.perf_counter()
        try:
            files = problem_sets.publish(stage / "_build" / "html")
        except SystemExit as exc:  # problem_sets reports its failures so, with the reason
            print(f"the problem sets' student versions were not built: {exc}", file=sys.stderr)
            return 1
        print(
            f"problem sets: {len(files)} student file(s) in the site's problem-sets/ "
            f"in {time.perf_counter() - t2:.1f} s"
        )
    return rc


if __name__ == "__main__":
    sys.exit(main())
