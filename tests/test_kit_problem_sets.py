"""The graded problem sets (tools/problem_sets.py, otter-grader): one per session, built with one command,
graded locally without Docker.

* Each set's source declares its questions with points; the manual ones carry a rubric.
* ``tools/problem_sets.py`` builds every set (``otter assign`` also runs every test against the solution):
  a student version without solutions or hidden tests, an autograder with both, a rubric page.
* Grading (``otter.api.grade_submission``, no container): the solution notebook gets every autograded
  point; the blank student version gets none; a plausible wrong answer (the tilted mean computed with
  plain exponentials, which overflow at large tilts) gets part of its question's points, not all; so does
  lesson 3's centred-query constant C(u) given for set 2's off-centre question.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import problem_sets
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SETS = problem_sets.sets()


def test_one_problem_set_per_session_with_points_and_rubrics():
    assert len(SETS) == 3, SETS
    for name in SETS:
        qs = problem_sets.questions(name)
        assert any(q["manual"] for q in qs) and any(not q["manual"] for q in qs), name
        text = (problem_sets.SOURCES / f"{name}.md").read_text()
        assert text.count("**Rubric") == sum(q["manual"] for q in qs), (
            f"{name}: a manual question has no rubric"
        )
        assert "hidden: true" in text, f"{name}: no hidden test"
        config = yaml.safe_load(text.split("# ASSIGNMENT CONFIG", 1)[1].split("```", 1)[0])
        assert config["name"] == name and f'otter.Notebook("{name}.ipynb")' in text


def test_the_sets_install_from_the_configured_repository():
    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    for name in SETS:
        assert f"git+{url}@main" in (problem_sets.SOURCES / f"{name}.md").read_text(), name


def test_otter_grader_is_pinned():
    assert re.search(r"^otter-grader==\d", (ROOT / "requirements.txt").read_text(), re.M)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("problem-sets")
    rc = problem_sets.main(["--out", str(out)])
    assert rc == 0
    return out


def _wrong_ps1(built: Path, tmp_path: Path) -> Path:
    """The solution of set 1 with the tilted mean written with plain exponentials (overflows)."""
    nb = json.loads((built / "ps1_measures" / "autograder" / "ps1_measures.ipynb").read_text())
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        if src.startswith("def tilted_mean"):
            cell["source"] = src.replace(
                "weights = torch.softmax(tokens @ a, dim=0)",
                "weights = torch.exp(tokens @ a); weights = weights / weights.sum()",
            )
    path = tmp_path / "ps1_measures.ipynb"
    path.write_text(json.dumps(nb))
    return path


def _wrong_ps2(built: Path, tmp_path: Path) -> Path:
    """The solution of set 2 with lesson 3's centred-query constant C(u) for question 2 (ignores mu)."""
    nb = json.loads(
        (built / "ps2_concentration" / "autograder" / "ps2_concentration.ipynb").read_text()
    )
    found = False
    for cell in nb["cells"]:
        if "".join(cell["source"]).startswith("def averaged_constant"):
            cell["source"] = (
                "def averaged_constant(u, mu):\n"
                "    k = 1 - 2 * u * u\n"
                "    return (k ** -0.5 + u * u * k ** -1.5) if k > 0 else math.inf\n"
            )
            found = True
    assert found
    path = tmp_path / "ps2_concentration.ipynb"
    path.write_text(json.dumps(nb))
    return path


@pytest.mark.book
def test_the_sets_build_and_grade_without_docker(built, tmp_path):
    assert (built / "README.md").exists() and (built / "student-versions.zip").exists()
    report = {}
    for name in SETS:
        result = built / name
        student = json.loads((result / "student" / f"{name}.ipynb").read_text())
        code = "\n".join("".join(c["source"]) for c in student["cells"] if c["cell_type"] == "code")
        assert "SOLUTION" not in code and "torch.softmax(tokens @ a" not in code, name
        assert "hidden: true" not in json.dumps(student["metadata"]), f"{name}: hidden tests leak"
        assert "**Rubric" in (result / "rubric.md").read_text()
        solution = problem_sets.grade(name, result / "autograder" / f"{name}.ipynb", built)
        blank = problem_sets.grade(name, result / "student" / f"{name}.ipynb", built)
        assert solution["auto"][0] == solution["auto"][1] > 0, (name, solution)
        assert blank["auto"][0] == 0, (name, blank)
        report[name] = {
            "solution": solution["auto"],
            "blank": blank["auto"],
            "manual": solution["manual"],
        }
    wrong = problem_sets.grade("ps1_measures", _wrong_ps1(built, tmp_path), built)
    q1 = wrong["questions"]["q1"]
    assert 0 < q1[0] < q1[1], wrong  # the public tests pass, the hidden large-tilt test does not
    assert 0 < wrong["auto"][0] < wrong["auto"][1], wrong
    report["ps1_measures (exp overflow)"] = {"wrong": wrong["auto"]}
    wrong2 = problem_sets.grade("ps2_concentration", _wrong_ps2(built, tmp_path), built)
    q2 = wrong2["questions"]["q2"]
    assert 0 < q2[0] < q2[1], (
        wrong2
    )  # lesson 3's C(u) passes the public test (u = 0), not the hidden
    assert wrong2["auto"][0] < wrong2["auto"][1], wrong2
    report["ps2_concentration (lesson 3's C(u))"] = {"wrong": wrong2["auto"]}
    path = ROOT / "_build" / "kit-report.json"
    path.parent.mkdir(exist_ok=True)
    old = json.loads(path.read_text()) if path.exists() else {}
    path.write_text(json.dumps({**old, "problem_sets": report}, indent=1))
    print(json.dumps(report, indent=1))
