"""Every chapter's student notebook runs in a Colab-like fresh environment, installing ``softlin`` itself.

What runs is the student copy that ``make students`` hands out (``tools/student_notebooks.py``: the paired
``book/**.ipynb`` converted for plain front ends by ``tools/colab_notebooks.py``, the conversion that also
makes what Colab opens, with the folded solutions removed and the exercises' check cells kept). Its code
cells are checked to be exactly those of the paired notebook, except the setup cell, which the conversion
pins to the commit it was made from (the template of ``tools/new_chapter.py`` at that commit), so running
it covers the Colab notebook too; after the run, every ``exercise-check`` cell must have run its check (it
prints "No answer yet" for the ``answer = None`` it starts with). The kernels talk over IPC
(``build_book.LocalKernelManager``), as the build's do.

The environment (``_build/colab-venv``, cached and reused while the pins do not change) holds only what
Colab has by default and this book uses: torch, numpy, matplotlib and ipywidgets, plus ipykernel, the
kernel a Colab runtime runs. The pins are those of ``requirements.txt``. ``softlin`` and everything it
depends on beyond these (scipy, tqdm) must come from the notebook's own setup cell. The setup cell
finds a softlin wheel in the notebook's folder, as ``make students`` hands the copies out (a wheel in
their folder, which the setup cell installs before anything else): here a wheel built once from a copy
of the files git would commit, as a clone would have them, so a broken install cell, a missing
dependency in ``pyproject.toml`` or a notebook that relies on the build environment fails here.
(``SOFTLIN_SOURCE`` is left unset; where the setup cell goes without a wheel, in Colab or with
``SOFTLIN_SOURCE``, is checked with ``%pip`` replaced, in ``tests/test_student_copies.py``.)

Each notebook is executed with papermill (run from the build environment, as Colab's frontend drives
its kernel) in ``fast`` mode through a kernel started from the fresh environment. The environment is
reset to its base packages once per session, so the first notebook installs ``softlin`` and its
dependencies; before every later notebook ``softlin`` alone is uninstalled again, so that each setup
cell really installs it (reinstalling scipy six times would only cost time: the setup cells are the same
code, which ``test_every_setup_cell_is_the_generated_one`` checks). The executed notebooks are kept in
``_build/colab-run/``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from build_book import notebook_chapters, page_name

pytestmark = pytest.mark.book

ROOT = Path(__file__).resolve().parents[1]
VENV = Path(os.environ.get("SOFTLIN_COLAB_VENV", ROOT / "_build" / "colab-venv")).resolve()
RUNS = ROOT / "_build" / "colab-run"
CHAPTERS = notebook_chapters(ROOT)
# What a Colab runtime has that this book uses (plus its kernel); nothing else goes into the environment.
COLAB_HAS = ["torch", "numpy", "matplotlib", "ipywidgets", "ipykernel"]
KERNEL = "softlin-colab-test"


def colab_requirements() -> list[str]:
    """The requirements.txt lines (with their pins) of the packages in COLAB_HAS."""
    lines = {}
    for raw in (ROOT / "requirements.txt").read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        name = re.split(r"[=<>!~\[; ]", line, maxsplit=1)[0].lower()
        if name in COLAB_HAS:
            lines[name] = line
    missing = [n for n in COLAB_HAS if n not in lines]
    assert not missing, f"requirements.txt does not pin {missing}"
    return [lines[n] for n in COLAB_HAS]


def venv_python() -> Path:
    return VENV / "bin" / "python"


def run(cmd, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw, check=False)
    if proc.returncode != 0:
        raise AssertionError(
            f"`{' '.join(map(str, cmd))}` failed (rc={proc.returncode}):\n"
            f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return proc


def freeze() -> dict[str, str]:
    out = run(
        [venv_python(), "-m", "pip", "list", "--format=json", "--disable-pip-version-check"]
    ).stdout
    return {p["name"].lower().replace("_", "-"): p["version"] for p in json.loads(out)}


def importable(module: str) -> bool:
    code = f"import importlib.util, sys; sys.exit(0 if importlib.util.find_spec({module!r}) else 1)"
    proc = subprocess.run([str(venv_python()), "-c", code], env=clean_env(), check=False)
    return proc.returncode == 0


def clean_env(**extra) -> dict:
    """The environment of the fresh kernel: nothing that would let it see the build environment."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP", "JUPYTER_PATH")
    }
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def colab_venv():
    """The cached fresh environment, (re)created when requirements.txt's pins of COLAB_HAS change."""
    reqs = colab_requirements()
    key = hashlib.sha256(json.dumps([reqs, sys.version, str(VENV)]).encode()).hexdigest()
    stamp = VENV / "colab-test.json"
    try:
        ok = json.loads(stamp.read_text())["key"] == key and venv_python().exists()
    except (OSError, ValueError, KeyError):
        ok = False
    if not ok:
        shutil.rmtree(VENV, ignore_errors=True)
        run([sys.executable, "-m", "venv", VENV])
        run(
            [venv_python(), "-m", "pip", "install", "-q", "--disable-pip-version-check", *reqs],
            env=clean_env(),
        )
        base = freeze()
        stamp.write_text(json.dumps({"key": key, "requirements": reqs, "base": base}, indent=1))
    base = json.loads(stamp.read_text())["base"]
    assert "softlin" not in base and "scipy" not in base, (
        "the fresh environment must not hold softlin or scipy"
    )
    reset_to_base(
        base
    )  # once per session: the first notebook installs softlin's dependencies itself
    return base


@pytest.fixture(scope="session")
def checkout_copy(tmp_path_factory):
    """The files git would commit (tracked, plus new files that are not ignored), as a clone has them."""
    dest = tmp_path_factory.mktemp("checkout") / "softlin-book"
    files = run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT
    ).stdout
    for rel in filter(None, files.split("\0")):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    assert (dest / "pyproject.toml").is_file() and (
        dest / "lib" / "softlin" / "__init__.py"
    ).is_file()
    return dest


@pytest.fixture(scope="session")
def softlin_wheel(checkout_copy, tmp_path_factory):
    """The wheel put beside each notebook: one that pip builds from the checkout copy, once per session.

    In Colab, ``pip install git+URL`` builds this same wheel from the same files; building it once here
    (with pip's build isolation, as Colab does) instead of in every notebook saves ~15 s per notebook."""
    wheels = tmp_path_factory.mktemp("wheel")
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--disable-pip-version-check",
            "-w",
            wheels,
            checkout_copy,
        ]
    )
    (wheel,) = wheels.glob("softlin-*.whl")
    return wheel


@pytest.fixture(scope="session")
def kernel_dir(tmp_path_factory, colab_venv):
    """A Jupyter data folder holding one kernel spec that starts the fresh environment's Python."""
    root = tmp_path_factory.mktemp("jupyter")
    spec = root / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [str(venv_python()), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "Python 3 (fresh Colab-like environment)",
                "language": "python",
            }
        )
    )
    return root


def test_every_setup_cell_is_the_generated_one():
    """The first code cell of every chapter is exactly the setup cell tools/new_chapter.py writes."""
    import jupytext
    from new_chapter import setup_cell

    expected = re.search(
        r"```\{code-cell\} ipython3\n:tags: \[remove-cell\]\n\n(.*?)\n```", setup_cell(), re.DOTALL
    )[1]
    for md in CHAPTERS:
        first = next(c for c in jupytext.read(md).cells if c.cell_type == "code")
        assert first.source.strip() == expected.strip(), (
            f"{md.name}: the first code cell differs from the setup cell of tools/new_chapter.py"
        )
        assert first.metadata.get("tags") == ["remove-cell"], (
            f"{md.name}: the setup cell must be tagged remove-cell"
        )


def reset_to_base(base: dict) -> None:
    extra = sorted(set(freeze()) - set(base))
    if extra:
        run([venv_python(), "-m", "pip", "uninstall", "-y", "-q", *extra])


@pytest.mark.parametrize("md", CHAPTERS, ids=page_name)
def test_student_notebook_runs_in_a_fresh_colab_like_environment(
    md, colab_venv, softlin_wheel, kernel_dir, monkeypatch, tmp_path
):
    import exercise_checks
    import nbformat
    import papermill
    from build_book import LocalKernelManager
    from new_chapter import setup_code
    from student_notebooks import student_copy

    paired = md.with_suffix(".ipynb")
    page = md.relative_to(ROOT).with_suffix("").as_posix()
    assert paired.exists(), f"{paired.name} is missing (jupytext --sync {md.relative_to(ROOT)})"
    student, _ = student_copy(paired)
    code = [(c.source, c.metadata.get("tags", [])) for c in student.cells if c.cell_type == "code"]
    source = [
        (c.source, c.metadata.get("tags", []))
        for c in nbformat.read(paired, as_version=4).cells
        if c.cell_type == "code"
    ]
    commit = student.metadata["softlin"]["converted_from"]
    assert code[0][0] == (setup_code(commit) if commit != "main" else source[0][0]), (
        f"{md.stem}: the student copy's setup cell is not the template at its commit"
    )
    assert code[1:] == source[1:], f"{md.stem}: the student copy changed the code cells"
    # Each check is also tried on its folded solution and on a wrong answer (tools/exercise_checks.py):
    # the harness cells, hidden, carry the solution code; the copy is then stripped as a student's is.
    tried = nbformat.read(paired, as_version=4)
    n_checks = exercise_checks.inject(tried)
    tried, _ = student_copy(tried, page=page)
    ipynb = tmp_path / paired.name
    nbformat.write(tried, ipynb)
    if "softlin" in freeze():
        run([venv_python(), "-m", "pip", "uninstall", "-y", "-q", "softlin"])
    assert not importable("softlin"), "softlin must not be importable before the setup cell runs"

    # the wheel beside the notebook, as in the student folder: the setup cell's first choice
    shutil.copy2(softlin_wheel, tmp_path / softlin_wheel.name)
    for key, value in clean_env(JUPYTER_PATH=str(kernel_dir)).items():
        monkeypatch.setenv(key, value)
    for key in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP", "SOFTLIN_SOURCE"):
        monkeypatch.delenv(key, raising=False)
    RUNS.mkdir(parents=True, exist_ok=True)
    out = RUNS / paired.name
    # A fast-mode cell takes seconds. Rarely (once in a dozen runs here) a kernel stops answering in the
    # explorer cell with idle CPU (ipywidgets comm traffic under nbclient; cf. jupyter/nbclient#312), so a
    # cell that hits the timeout is retried once, from a reset environment; a second timeout fails.
    timeout = int(os.environ.get("SOFTLIN_CELL_TIMEOUT", "240"))
    for attempt in (1, 2):
        try:
            papermill.execute_notebook(
                str(ipynb),
                str(out),
                parameters={"mode": "fast"},
                kernel_name=KERNEL,
                kernel_manager_class=LocalKernelManager,  # IPC, no TCP: no transport warning
                cwd=str(tmp_path),
                progress_bar=False,
                log_output=False,
                execution_timeout=timeout,
            )
            break
        # papermill re-raises a cell's error (any type); nbclient raises timeouts itself
        except Exception as exc:  # noqa: BLE001 (every failure is reported below)
            name = getattr(exc, "ename", type(exc).__name__)
            if attempt == 1 and name in ("CellTimeoutError", "TimeoutError", "DeadKernelError"):
                print(f"{ipynb.name}: {name} ({exc}); retrying once")
                reset_to_base(colab_venv)
                continue
            detail = (
                f"{exc.ename}: {exc.evalue}\n{''.join(exc.traceback)[-3000:]}"
                if isinstance(exc, papermill.PapermillExecutionError)
                else f"{name}: {exc}"
            )
            pytest.fail(
                f"{ipynb.name} failed in the fresh environment (executed copy: {out}):\n{detail}"
            )

    ran = nbformat.read(out, as_version=4)
    for cell in ran.cells:
        if cell.cell_type == "code" and "exercise-check" in cell.metadata.get("tags", []):
            text = "".join(
                o.get("text", "") + o.get("data", {}).get("text/plain", "")
                for o in cell.get("outputs", [])
            )  # printed, or displayed (answer_check's "No answer yet")
            assert "No answer yet" in text, (
                f"{ipynb.name}: a check cell did not run its check: {text[:300]!r}"
            )

    records = exercise_checks.collect(ran)
    assert len(records) == n_checks, (md.stem, records)
    for r in records:
        assert "error" not in r, f"{md.stem}: {r}"
        assert r["accepted"] and r["accepted_message"].startswith("Correct"), (md.stem, r)
        assert r["rejected"] and not r["revealed"], (md.stem, r)
    if md.stem == "05_icl_linear_regression":  # the paper-scale results ship with softlin
        text = "".join(
            o.get("text", "")
            for c in ran.cells
            if c.cell_type == "code"
            for o in c.get("outputs", [])
        )
        assert "results file is not available here" not in text, (
            "chapter 5's paper-scale section was skipped: softlin did not ship paper_experiment.json"
        )

    after = freeze()
    assert "softlin" in after, f"{ipynb.name}: the setup cell did not install softlin"
    assert after.get("torch") == colab_venv["torch"], (
        f"{ipynb.name}: installing softlin changed torch {colab_venv['torch']} -> {after.get('torch')}; "
        "softlin must never pin torch"
    )
    changed = {
        k: (colab_venv[k], after.get(k)) for k in colab_venv if after.get(k) != colab_venv[k]
    }
    assert not changed, f"{ipynb.name}: the setup cell changed Colab's own packages: {changed}"
