"""Every exercise self-check accepts its folded solution and rejects a wrong answer without showing the key.

For every code cell tagged ``exercise-check`` (README, "Writing or editing a chapter", item 4), the fast-mode
execution of the gate (``fast_run``, ``tools/build_book.py --exercise-checks``) ran, right after it and
hidden: the ``python`` block of the exercise's folded ``{solution}`` (it ends by assigning ``answer``),
the check on that answer, and the check on a wrong answer derived from it (every entry moved by 0.37 times
the largest; for a function, its values moved so). Here each record must say: accepted with "Correct",
rejected, and no entry of the key in the rejection message. The machinery itself is tested first on
fixture chapters, one of them with checks broken in each of these ways.
"""

from __future__ import annotations

import json
from pathlib import Path

import exercise_checks
import nbformat
import pytest
from build_book import notebook_chapters, page_name
from conftest import make_book, run_build

pytestmark = pytest.mark.book

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = notebook_chapters(ROOT)


def check_cells(md: Path) -> list[str]:
    import jupytext

    return [
        exercise_checks.check_name(c) or "?"
        for c in jupytext.read(md).cells
        if c.cell_type == "code" and exercise_checks.TAG_CHECK in c.metadata.get("tags", [])
    ]


def problems(records: list[dict]) -> list[str]:
    out = []
    for r in records:
        name = r.get("label")
        if "error" in r:
            out.append(f"{name}: {r['error']}")
            continue
        if not (r["accepted"] and r["accepted_message"].startswith("Correct")):
            out.append(f"{name}: the folded solution is not accepted: {r['accepted_message']!r}")
        if not r["rejected"]:
            out.append(
                f"{name}: a wrong answer (off by 37 %) is accepted: {r['rejected_message']!r}"
            )
        if r["revealed"]:
            out.append(
                f"{name}: the rejection message shows the key {r['revealed']}: {r['rejected_message']!r}"
            )
    return out


@pytest.fixture(scope="module")
def fixture_run(tmp_path_factory):
    root = make_book(
        tmp_path_factory.mktemp("exbook"),
        ["01_explorer_and_exercises.md", "02_broken_exercises.md"],
    )
    rc, log, stage, _ = run_build(
        "--root",
        str(root),
        "--mode",
        "fast",
        "--no-html",
        "--exercise-checks",
        stage=root / "_build" / "stage",
    )
    return rc, log, stage


def records_of(stage: Path, stem: str) -> list[dict]:
    return exercise_checks.collect(nbformat.read(stage / "book" / f"{stem}.ipynb", as_version=4))


def test_the_harness_accepts_good_checks_and_restores_the_random_state(fixture_run):
    rc, log, stage = fixture_run
    assert rc == 0, log[-3000:]  # includes the fixture's last cell: the generator was restored
    records = records_of(stage, "01_explorer_and_exercises")
    assert [r["label"] for r in records] == ["ex-fx-value", "ex-fx-function"]
    assert problems(records) == []
    assert all(r["rejected_message"].startswith("Not yet") for r in records)
    status = json.loads((stage / "status.json").read_text())
    assert {r["chapter"]: r["exercise_checks"] for r in status["chapters"]} == {
        "01_explorer_and_exercises": 2,
        "02_broken_exercises": 3,
    }


def test_the_harness_catches_a_leaky_check_a_wrong_solution_and_a_missing_one(fixture_run):
    _, _, stage = fixture_run
    found = problems(records_of(stage, "02_broken_exercises"))
    assert len(found) == 3, found
    assert "ex-bad-leak: the rejection message shows the key [-1.875, 0.4321]" in found[0]
    assert found[1].startswith("ex-bad-solution: the folded solution is not accepted")
    assert found[2].startswith("check_ex_bad_missing: no {solution} with a python block")


def test_the_harness_cells_are_hidden_on_the_site(fixture_run):
    _, _, stage = fixture_run
    nb = nbformat.read(stage / "book" / "01_explorer_and_exercises.ipynb", as_version=4)
    harness = [c for c in nb.cells if exercise_checks.TAG_HARNESS in c.metadata.get("tags", [])]
    assert len(harness) == 2 and all("remove-cell" in c.metadata["tags"] for c in harness)


@pytest.mark.parametrize("md", CHAPTERS, ids=page_name)
def test_every_exercise_check_accepts_its_solution_and_rejects_a_wrong_answer(fast_run, md):
    _rc, _log, stage = fast_run
    status = json.loads((stage / "status.json").read_text())
    record = next(r for r in status["chapters"] if r["chapter"] == page_name(md))
    assert record["error"] is None, (
        f"{page_name(md)} failed in fast mode:\n{record['error'][-3000:]}"
    )
    expected = check_cells(md)
    records = records_of(stage, page_name(md))
    assert len(records) == len(expected), (md.stem, expected, records)
    for name, r in zip(expected, records):
        if "error" not in r:
            assert name in (r["label"], "check_" + r["label"].replace("-", "_")), (name, r)
    assert problems(records) == [], f"{md.stem}:\n" + "\n".join(problems(records))
