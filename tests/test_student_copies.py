"""Student copies read as the site does and hold the exercises and their check calls, never an answer key.

``tools/student_notebooks.py`` makes them with the one conversion for plain front ends
(``tools/colab_notebooks.py``, ``audience="student"``): no MyST construct is left, exercises are numbered
as on the site, the folded solutions are gone, and every lesson has its lab beside it. The keys are
computed by ``softlin.book.exercises`` from the label of each ``answer_check("<label>", answer, ...)``
call, so no cell of a page computes one. :func:`student_notebooks.answer_key_cells` finds answer-key
code in a notebook (the tool refuses to write such a copy); it is shown to catch a planted key cell, and
the tool is shown to refuse a page with a construct it cannot convert. Whether every check still accepts
its solution and rejects a wrong answer in a fresh Colab-like environment is tested in
``tests/test_colab.py``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import colab_notebooks as cn
import exercise_checks
import nbformat
import pytest
from build_book import is_lab, is_lesson, lab_of, lessons, notebook_chapters, page_name
from new_chapter import repository_url, setup_code
from softlin.book.exercises import KEYS
from student_notebooks import answer_key_cells, main, student_copy

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = notebook_chapters(ROOT)
PAGES = [md for md in CHAPTERS if is_lesson(md) or is_lab(md)]


def markdown(nb) -> str:
    return "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


@pytest.mark.parametrize("md", PAGES, ids=page_name)
def test_a_student_copy_holds_no_myst_no_answer_key_and_no_solution(md):
    nb, removed = student_copy(md.with_suffix(".ipynb"))
    source = nbformat.read(md.with_suffix(".ipynb"), as_version=4)
    assert cn.raw_myst(markdown(nb)) == [], f"{md.stem}: MyST left in the copy"
    assert answer_key_cells(nb) == [], f"{md.stem}: answer-key code in {answer_key_cells(nb)}"
    text = "\n".join(c.source for c in nb.cells)
    assert (
        "{solution}" not in text
        and "Solution to" not in text
        and "<details>\n<summary><b>Sol" not in text
    )
    assert removed == len(re.findall(r"^(`{3,}|:{3,})\{solution\}", markdown(source), re.M))
    for label, code in exercise_checks.solutions(source).items():
        last = [line for line in code.strip().splitlines() if line.startswith("answer")]
        assert not last or last[-1] not in text, (
            f"{md.stem}: {label}'s solution line is in the copy"
        )
    # exercises numbered as on the site, one title per exercise of the source
    n_exercises = len(re.findall(r"^(`{3,}|:{3,})\{exercise\}", markdown(source), re.M))
    numbers = re.findall(r"\*\*Exercise (L?\d+(?:\.\d+)*)\*\*", markdown(nb))  # labs: L3.1
    assert len(numbers) == n_exercises, (md.stem, numbers)
    if is_lesson(md):
        chapter = {n.split(".")[0] for n in numbers}
        assert len(chapter) <= 1 and all("." in n for n in numbers), numbers


@pytest.fixture(scope="module")
def student_folder(tmp_path_factory) -> Path:
    """What ``make students`` writes, written once for this module: the folder (the zip beside it)."""
    out = tmp_path_factory.mktemp("built") / "students"
    assert main(["--out", str(out)]) == 0
    return out


def test_every_lesson_has_its_lab_beside_it_in_the_student_folder(student_folder):
    written = sorted(
        p.relative_to(student_folder).with_suffix("").as_posix()
        for p in student_folder.rglob("*.ipynb")
    )
    expected = sorted(page_name(md) for md in PAGES)
    assert written == expected
    for lesson in lessons(ROOT):
        if lab_of(lesson).exists():
            assert page_name(lab_of(lesson)) in written
    assert student_folder.with_suffix(".zip").is_file()
    # the folder says how to run a copy and where its links go, in the zip too
    readme = (student_folder / "README.md").read_text()
    for needed in ("Colab", "softlin-*.whl", "labs/", cn.Converter(ROOT).student_site):
        assert needed in readme, f"the students' README.md does not mention {needed}"
    with zipfile.ZipFile(student_folder.with_suffix(".zip")) as zf:
        assert "README.md" in zf.namelist()


# The setup cell run as a notebook runs it (IPython, ``%pip`` expanded), in the working directory the
# test gives, with ``%pip`` replaced by a magic that records its line and, if asked, softlin made not
# importable (``importlib.util.find_spec`` answers None for it) and Colab faked (``google.colab`` among
# the modules); prints the lines ``%pip`` was given, as JSON.
RUN_SETUP = """
import importlib.util, json, sys
from IPython.core.interactiveshell import InteractiveShell

find_spec = importlib.util.find_spec
if sys.argv[1] == "absent":
    importlib.util.find_spec = lambda name, *a: None if name == "softlin" else find_spec(name, *a)
if sys.argv[2] == "colab":
    sys.modules["google.colab"] = type(sys)("google.colab")
shell = InteractiveShell.instance()
pip = []
shell.register_magic_function(pip.append, "line", "pip")
shell.run_cell(sys.stdin.read()).raise_error()
print(json.dumps(pip))
"""


def run_setup(code: str, cwd: Path, softlin="absent", colab=False, source=None) -> list[str]:
    """The lines the setup cell ``code`` gives ``%pip`` in ``cwd`` (see :data:`RUN_SETUP`)."""
    env = {k: v for k, v in os.environ.items() if k not in ("SOFTLIN_SOURCE", "PYTHONSTARTUP")}
    env["IPYTHONDIR"] = str(cwd.parent / ".ipython-setup-test")
    if source:
        env["SOFTLIN_SOURCE"] = source
    proc = subprocess.run(
        [sys.executable, "-c", RUN_SETUP, softlin, "colab" if colab else "local"],
        input=code,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


WHEELS = ["softlin-0.9.0-py3-none-any.whl", "softlin-0.10.0-py3-none-any.whl"]
MAIN = f"git+{repository_url()}@main"


@pytest.mark.parametrize(
    ("wheels", "softlin", "colab", "source", "installs"),
    [
        (WHEELS, "absent", False, None, "softlin-0.10.0-py3-none-any.whl"),  # the newest version
        (WHEELS, "absent", True, None, "softlin-0.10.0-py3-none-any.whl"),  # Colab, wheel uploaded
        (WHEELS[:1], "absent", False, "/x/book", "softlin-0.9.0-py3-none-any.whl"),
        (WHEELS, "present", True, None, None),  # softlin importable: nothing to install
        ([], "absent", False, None, None),  # no wheel, not Colab: a no-op, as before
        ([], "absent", True, None, MAIN),  # Colab without a wheel: the book's repository
        ([], "absent", False, "/x/book", "/x/book"),
    ],
    ids=["wheels", "colab-wheel", "wheel-over-source", "present", "no-op", "colab", "source"],
)
def test_the_setup_cell_installs_a_wheel_beside_it_first(
    wheels, softlin, colab, source, installs, tmp_path
):
    folder = tmp_path / "fresh"
    folder.mkdir()
    for name in wheels:
        (folder / name).write_bytes(b"")  # %pip is replaced: the cell only chooses the file
    pip = run_setup(setup_code(), folder, softlin=softlin, colab=colab, source=source)
    assert pip == ([f"install -q {installs}"] if installs else []), pip


def test_the_student_folder_and_zip_carry_the_wheel_the_setup_cells_install(
    student_folder, tmp_path
):
    """``make students`` puts a softlin wheel beside the lessons and beside the labs, in the folder
    and in the zip; unpacked, a lesson's and a lab's setup cell, run in its own folder where softlin
    is not importable (and not in Colab), install that wheel."""
    wheel = [p.name for p in student_folder.glob("softlin-*.whl")]
    assert len(wheel) == 1 and wheel[0].endswith("-py3-none-any.whl"), wheel
    assert (student_folder / "labs" / wheel[0]).is_file()
    assert (student_folder / "labs" / wheel[0]).read_bytes() == (
        student_folder / wheel[0]
    ).read_bytes()
    with zipfile.ZipFile(student_folder.with_suffix(".zip")) as zf:
        names = zf.namelist()
        assert sorted(n for n in names if n.endswith(".whl")) == sorted(
            [wheel[0], f"labs/{wheel[0]}"]
        )
        with zf.open(wheel[0]) as whl, zipfile.ZipFile(whl) as inner:
            assert "softlin/__init__.py" in inner.namelist()
        zf.extractall(tmp_path / "unpacked")
    lesson = next(md for md in PAGES if is_lesson(md) and lab_of(md).exists())
    for md in (lesson, lab_of(lesson)):
        notebook = tmp_path / "unpacked" / f"{page_name(md)}.ipynb"
        nb = nbformat.read(notebook, as_version=4)
        setup = next(c for c in nb.cells if c.cell_type == "code")
        assert setup.source.startswith(cn.SETUP_MARK)
        assert run_setup(setup.source, notebook.parent) == [f"install -q {wheel[0]}"], md


def test_every_check_call_names_a_registered_key_and_every_key_is_used():
    used = []
    for md in CHAPTERS:
        for cell in nbformat.read(md.with_suffix(".ipynb"), as_version=4).cells:
            if cell.cell_type == "code" and exercise_checks.TAG_CHECK in cell.metadata.get(
                "tags", []
            ):
                found = exercise_checks.registry_call(cell.source)
                assert found, f"{md.stem}: a check cell without answer_check(label, answer, ...)"
                used.append(found[0])
    assert sorted(used) == sorted(KEYS), (sorted(used), sorted(KEYS))


def copy_of_the_book(dest: Path) -> Path:
    """The sources the conversion reads (config, toc, every page and its pair, the bibliography)."""
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy2(ROOT / name, dest / name)
    for src in (ROOT / "book").rglob("*"):
        if src.suffix in (".md", ".ipynb", ".bib") and "_build" not in src.parts:
            (dest / src.relative_to(ROOT)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / src.relative_to(ROOT))
    return dest


@pytest.mark.parametrize(
    "planted",
    [
        "check_ex_ch1_one_token = answer_check(\n    lambda: V @ tokens[0], rtol=1e-9)",
        "def check_ex_ch1_one_token(answer):\n    return abs(answer - 1.0) < 1e-9",
        "key = answer_check(lambda: V @ tokens[0])",
        "%time\ncheck_ex_ch1_one_token = answer_check(lambda: 1.0)",
    ],
)
def test_a_planted_key_cell_is_found_and_refused(planted, tmp_path, capsys):
    book = copy_of_the_book(tmp_path)
    first = CHAPTERS[0]
    ipynb = book / first.relative_to(ROOT).with_suffix(".ipynb")
    nb = nbformat.read(ipynb, as_version=4)
    nb.cells.insert(5, nbformat.v4.new_code_cell(planted, metadata={"tags": ["remove-cell"]}))
    assert answer_key_cells(nb) == [f"cell 5: {planted.splitlines()[0]}"]
    nbformat.write(nb, ipynb)
    assert main(["--root", str(book), "--out", str(tmp_path / "out"), page_name(first)]) == 1
    assert "refusing to write a student copy" in capsys.readouterr().err


@pytest.mark.parametrize(
    "planted",
    ["```{margin}\nA side note.\n```", "See {abbr}`MGF (moment generating function)`."],
)
def test_a_planted_construct_the_conversion_cannot_write_is_refused(planted, tmp_path, capsys):
    book = copy_of_the_book(tmp_path)
    first = CHAPTERS[0]
    ipynb = book / first.relative_to(ROOT).with_suffix(".ipynb")
    nb = nbformat.read(ipynb, as_version=4)
    nb.cells.insert(3, nbformat.v4.new_markdown_cell(planted))
    nbformat.write(nb, ipynb)
    assert main(["--root", str(book), "--out", str(tmp_path / "out"), page_name(first)]) == 1
    assert "no plain-Markdown form" in capsys.readouterr().err
    assert not (tmp_path / "out" / f"{page_name(first)}.ipynb").exists()


def test_copies_link_to_the_published_student_edition_by_default():
    """Without ``--site`` a copy's links to the book's pages go to the student edition that the Pages
    workflow publishes under the book's site (``student/``: no solutions, no instructors' pages),
    and a reference to an instructors' page is reduced to its text."""
    conv = cn.Converter(ROOT)
    public = cn.site_url(conv.config)
    nb, _ = student_copy(ROOT / "book" / "07_beyond_the_paper.ipynb")
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    pages = re.findall(rf"\]\({re.escape(public)}([^)#]+)", text)
    lesson_links = [p for p in pages if "_" in p]
    assert lesson_links and all(p.startswith(cn.STUDENT_EDITION) for p in pages), pages
    assert "instructor" not in text and "the course's problem set 2 proves" in text
    # a reference without a DOI, an arXiv page or a URL links to the student edition's references
    nb, _ = student_copy(ROOT / "book" / "02_infinite_prompt_limit.ipynb")
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    cited = re.findall(r"\]\((\S+book/references\.html)\)", text)
    assert cited and all(u == f"{public}{cn.STUDENT_EDITION}book/references.html" for u in cited), (
        cited
    )
    workflow = (ROOT / ".github" / "workflows" / "book.yml").read_text()
    assert (
        "_build/stage/_build/html/" + cn.STUDENT_EDITION.rstrip("/") in workflow
    )  # where it is published


def test_copies_link_to_the_student_edition_where_it_is_hosted(tmp_path, capsys):
    """With ``--site`` (``make students STUDENT_SITE=...``) every link of a copy to another page of the
    book goes to that address, none to the public book, whose pages fold the solutions."""
    out = tmp_path / "out"
    site = "https://example.edu/softlin-students"
    assert main(["--out", str(out), "--site", site + "/", "01_measure_view"]) == 0
    text = (out / "01_measure_view.ipynb").read_text()
    public = cn.site_url(cn.Converter(ROOT).config)
    assert f"{site}/book/" in text, "no link to the hosted student edition"
    assert public not in text, f"a link to the public book ({public}) is left"
    assert f"go to {site}/." in (out / "README.md").read_text(), "the README names another site"
    with pytest.raises(SystemExit):
        main(["--out", str(out), "--site", "example.edu", "01_measure_view"])
    capsys.readouterr()
