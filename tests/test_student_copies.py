"""Student copies hold the exercises and their check calls, never an answer key.

``tools/student_notebooks.py`` removes the folded solutions; the keys are computed by
``softlin.book.exercises`` from the label of each ``answer_check("<label>", answer, ...)`` call, so no cell
of a chapter computes one. :func:`student_notebooks.answer_key_cells` finds answer-key code in a notebook
(the tool refuses to write such a copy); it is shown to catch a planted key cell. Whether every check
still accepts its solution and rejects a wrong answer in a fresh Colab-like environment is tested in
``tests/test_colab.py``.
"""

from __future__ import annotations

from pathlib import Path

import exercise_checks
import nbformat
import pytest
from build_book import notebook_chapters, page_name
from softlin.book.exercises import KEYS
from student_notebooks import answer_key_cells, main, student_copy

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = notebook_chapters(ROOT)


@pytest.mark.parametrize("md", CHAPTERS, ids=page_name)
def test_a_student_copy_holds_no_answer_key_and_no_solution(md):
    nb, _ = student_copy(md.with_suffix(".ipynb"))
    assert answer_key_cells(nb) == [], f"{md.stem}: answer-key code in {answer_key_cells(nb)}"
    text = "\n".join(c.source for c in nb.cells)
    assert "{solution}" not in text
    for label, code in exercise_checks.solutions(
        nbformat.read(md.with_suffix(".ipynb"), as_version=4)
    ).items():
        last = [line for line in code.strip().splitlines() if line.startswith("answer")]
        assert not last or last[-1] not in text, (
            f"{md.stem}: {label}'s solution line is in the copy"
        )


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
    assert len(used) == 15


@pytest.mark.parametrize(
    "planted",
    [
        "check_ex_ch1_one_token = answer_check(\n    lambda: V @ tokens[0], rtol=1e-9)",
        "def check_ex_ch1_one_token(answer):\n    return abs(answer - 1.0) < 1e-9",
        "key = answer_check(lambda: V @ tokens[0])",
        "%time\ncheck_ex_ch1_one_token = answer_check(lambda: 1.0)",
    ],
)
def test_a_planted_key_cell_is_found_and_refused(planted, tmp_path, monkeypatch, capsys):
    nb = nbformat.read(CHAPTERS[0].with_suffix(".ipynb"), as_version=4)
    nb.cells.insert(5, nbformat.v4.new_code_cell(planted, metadata={"tags": ["remove-cell"]}))
    assert answer_key_cells(nb) == [f"cell 5: {planted.splitlines()[0]}"]
    book = tmp_path / "book"
    book.mkdir()
    nbformat.write(nb, book / CHAPTERS[0].with_suffix(".ipynb").name)
    import student_notebooks

    monkeypatch.setattr(
        student_notebooks, "notebook_chapters", lambda root: [book / CHAPTERS[0].name]
    )
    assert main(["--out", str(tmp_path / "out")]) == 1
    assert "refusing to write a student copy" in capsys.readouterr().err
