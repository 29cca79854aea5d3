"""The graded problem sets (tools/problem_sets.py, otter-grader): one per session, built with one command,
graded locally without Docker.

* Each set's source declares its questions with points; the manual ones carry a rubric.
* ``tools/problem_sets.py`` builds every set (``otter assign`` also runs every test against the solution):
  a student version without solutions or hidden tests, an autograder with both, a rubric page.
* The sources install softlin from ``@main``; the built student notebooks install it at the commit they
  were built from, as the lessons' student copies do.
* Grading (``otter.api.grade_submission``, no container): the solution notebook gets every autograded
  point; the blank student version gets none; a plausible wrong answer gets less than all of its
  question's points: set 1's fourth central moment in place of the fourth cumulant, set 2's Gaussian
  constant e^{a^2}(1 + a^2) for exponential tokens and the centred queries' constant (the mean of the
  queries ignored) for the off-centre question, set 3's guessed c = 1/4 in place of the best
  c, and Theorem 5.2's cap (or the largest start without its factor 2) for set 3's largest start.
* The public checks carry no points (all autograded points are on hidden checks), so an answer that
  only passes the public checks, such as a stub returning constants, earns nothing.
* An answer right in part earns that part's points: set 2's simulation with the standard error
  missing its / sqrt(n) earns 1 of question 3's 1.5 points (the estimate's two hidden checks), and the
  failed hidden check's message names the standard error.
* Shortcuts score nothing on their question (public check included): set 2's simulation replaced by
  C_1 typed in or C_1 plus seeded noise (the hidden checks redraw the prompts from the seed), and set
  3's questions 1 and 4 answered by the library's constants (the checks watch the function run).
* The setup cell imports everything before the grader line; no public check uses what another
  question defines; a variant's rate of the exponential tokens takes many values; "1 point", not
  "1 points".
* Under a simulated Colab (``google.colab`` faked, no notebook file or tests/ folder in the working
  directory), each student version writes its public checks from its setup cell and runs them.
* Each derivation whose code a quadrature, automatic differentiation or a numerical minimisation can
  pass has a question graded by hand ("show your derivation") that says so.
* ``--grade --csv FILE`` writes a gradebook: one row per submission, each question's points awarded
  (empty for those graded by hand), then auto_awarded, auto_possible, an empty manual_awarded,
  manual_possible, an empty total_awarded, total_possible and an empty comments: no column shows points possible under a name without "_possible".
  The shipped grade_all.py writes the same header and points (its functions write both CSVs; the
  set's questions come from the build's questions.json).
* The shipped grade_all.py's feedback gives per question the points, the failed public checks' messages
  and only how many hidden checks failed: none of the hidden checks' messages (they state hidden inputs
  and expected values), told apart by otter's "Public Tests" entry (checked against the autograder's
  own hidden flags).
* The kit README's bubblewrap sandbox (``problem_sets.SANDBOX``), run as printed where bwrap works,
  gives the solution with a hostile cell full marks, and the cell's writes to the home and the kit,
  its read of ``~/.ssh`` and its connections all fail.
* ``autograder.zip`` lists torch, scipy and softlin (at the commit the set installs) among its
  requirements, for Gradescope, which builds its own environment from the zip.
* The site hosts the student versions and nothing else of the sets (``problem_sets.publish``, run by
  ``tools/build_book.py``): three notebooks and their zip, listed on the instructor page.
* Variants (``--variant SEED``): the numerical inputs are placeholders in the sources; without a variant
  they are the defaults, with one they are drawn from its seed and every set still builds (its solution
  passes its own tests) and its solution gets full marks, while set 1's default solution, graded by the
  variant's autograder, loses the questions whose numbers changed.
"""

from __future__ import annotations

import csv
import json
import math
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import problem_sets
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SETS = problem_sets.sets()
VARIANT = 2025


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


WORDS = {"Ten": 10, "Eleven": 11, "Twelve": 12, "Thirteen": 13, "Fourteen": 14, "Fifteen": 15}


def test_otter_s_kernels_talk_over_ipc_and_the_default_comes_back():
    """``otter assign`` starts its own kernels; inside :func:`problem_sets.local_kernels` they use IPC, so
    that ipykernel does not warn of unencrypted TCP while a lecturer builds a variant."""
    import zmq
    from jupyter_client import KernelManager

    if not zmq.has("ipc"):
        pytest.skip("ZeroMQ has no IPC transport here (Windows)")
    assert KernelManager().transport == "tcp"
    with problem_sets.local_kernels():
        assert KernelManager().transport == "ipc"
    assert KernelManager().transport == "tcp", "local_kernels left jupyter_client's default changed"


def test_the_points_are_stated_alike_everywhere():
    """A set's total and autograded points, as its questions declare them, are the ones its opening
    paragraph states, and the total is the one book/instructor.md quotes in the plan and in its short
    section on the sets, and book/grading.md in the table of sets; every question's title states its own
    points."""
    plan = (ROOT / "book" / "instructor.md").read_text()
    summary = plan.split("\n## Problem sets\n", 1)[1].split("\n## ", 1)[0]
    grading = (ROOT / "book" / "grading.md").read_text()
    for n, name in enumerate(SETS, 1):
        qs = problem_sets.questions(name)
        total = sum(q["points"] for q in qs)
        auto = sum(q["points"] for q in qs if not q["manual"])
        text = (problem_sets.SOURCES / f"{name}.md").read_text()
        stated = re.search(r"\b(\w+) points: ([\d.]+) for", text)
        assert stated and WORDS.get(stated[1]) == total and float(stated[2]) == auto, (
            name,
            stated and stated.groups(),
            total,
            auto,
        )
        assert f"problem set {n} ({total:g} points" in plan, (name, total)
        assert re.search(rf"\bset {n}\b[^.]*?\b{total:g} points", summary, re.I), (name, total)
        assert re.search(rf"^\| {n}\. [^|]*\({total:g} points\) \|", grading, re.M), (name, total)
        for q in qs:
            title = rf"\*\*Question {q['name'][1:]} \({q['points']:g} points?[,)]"
            assert re.search(title, text), (
                f"{name}: {q['name']}'s title does not say {q['points']:g}"
            )


def _setup_cell(text: str) -> str:
    return next(b for b in text.split("```{code-cell} ipython3\n")[1:] if "otter.Notebook(" in b)


def test_the_public_checks_carry_no_points():
    """A stub that passes a public check (constants that happen to satisfy it) must earn nothing."""
    for name in SETS:
        text = (ROOT / "course" / "problem_sets" / f"{name}.md").read_text()
        configs = re.findall(r"# BEGIN TEST CONFIG\n(.*?)\n\"\"\" # END TEST CONFIG", text, re.S)
        assert configs, name
        for config in configs:
            spec = yaml.safe_load(config)
            if not spec.get("hidden"):
                assert spec.get("points") == 0, (name, config)
            else:
                assert spec.get("points", 0) > 0, (name, config)


def test_the_setup_cell_imports_everything_before_the_grader():
    """The grader is the setup cell's last line: every import comes before it."""
    for name in SETS:
        cell = _setup_cell((problem_sets.SOURCES / f"{name}.md").read_text()).split("```")[0]
        lines = [ln for ln in cell.strip().splitlines() if ln.strip()]
        assert lines[-1] == f'grader = otter.Notebook("{name}.ipynb")', (name, lines[-1])


def _questions_code(text: str) -> dict[str, tuple[str, list[str]]]:
    """Each autograded question's answer code and its public checks' code, from a set's source."""
    out = {}
    for opened in text.split("# BEGIN QUESTION\n")[1:]:
        q = re.search(r"name:\s*(\w+)", opened)[1]
        block = opened.split("# END QUESTION", 1)[0]
        cells = re.findall(r"```\{code-cell\} ipython3\n(.*?)```", block, re.S)
        answers = "\n".join(c for c in cells if "BEGIN TEST CONFIG" not in c)
        public = [c for c in cells if "BEGIN TEST CONFIG" in c and "hidden: true" not in c]
        out[q] = (answers, public)
    return out


def test_each_public_check_uses_only_its_own_question():
    """A public check calls only what its own question defines (and the setup's names): a slip in one
    question does not fail another's checks (set 3's question 4 once compared with question 2's
    best_ratio)."""
    for name in SETS:
        qs = _questions_code((problem_sets.SOURCES / f"{name}.md").read_text())
        defined = {q: set(re.findall(r"^def (\w+)|^(\w+) =", a, re.M)) for q, (a, _) in qs.items()}
        defined = {q: {n for pair in names for n in pair if n} for q, names in defined.items()}
        for q, (_, public) in qs.items():
            others = set().union(*(d for o, d in defined.items() if o != q)) - defined[q]
            for check in public:
                used = {n for n in others if re.search(rf"\b{n}\b", check)}
                assert not used, (name, q, used)


def test_a_variant_whose_solution_fails_its_tests_leaves_nothing_and_says_why(
    tmp_path, monkeypatch, capsys
):
    """r69's lecturer: a seed whose solution failed its own hidden test crashed with a traceback and
    left a half-written variant folder. The builder now stops with status 1, removes the folder it
    created and names the set, the seed and otter's message (no otter run here: ``build`` raises as
    otter assign does)."""
    out = tmp_path / "variant-123"

    def failing(name, out_dir, **kwargs):
        (out_dir / name).mkdir(parents=True)  # a half-written set, as otter assign leaves one
        raise RuntimeError("Some autograder tests failed in the autograder notebook:\n q2 - 4")

    monkeypatch.setattr(problem_sets, "build", failing)
    assert problem_sets.main(["--variant", "123", "--out", str(out)]) == 1
    assert not out.exists(), sorted(out.rglob("*"))
    err = capsys.readouterr().err
    for said in (
        "ps1_measures for the seed 123",
        "Some autograder tests failed",
        "Nothing was written",
    ):
        assert said in err, err


def test_set_1_and_2_hidden_references_are_exact_for_every_tilt_of_many_seeds():
    """The hidden tests of set 1's question 2 and set 2's question 1 compare an answer with a
    reference computed by quadrature. r69's lecturer found a seed (73918264) whose tilt near lambda
    made that quadrature 4e-6 off, failing the exact solution at a 1e-8 tolerance. The references
    now integrate in y = (lambda - a) x; here they are run, as the sources write them, at the tilts
    of 200 seeds and that one, against the Gamma law's closed forms, to 1e-11."""
    import re as _re

    def reference(name: str, seed: int) -> tuple[dict, str]:
        values = problem_sets.parameters(seed)[name]
        source = (ROOT / "course" / "problem_sets" / f"{name}.md").read_text()
        block = source.split("from scipy.integrate import quad as _quad\n", 1)[1].split(
            "\n# 1e-5", 1
        )[0]
        code = _re.sub(r"\{\{(\w+)\}\}", lambda m: repr(values[m[1]]), block)
        scope: dict = {"math": math}
        exec("from scipy.integrate import quad as _quad\n" + code, scope)
        return values, scope["_ref"]

    for seed in [*range(200), 73918264]:
        v, ref = reference("ps1_measures", seed)
        k, lam = v["shape"], v["lam"]
        for a in v["q2_tilts"]:
            assert abs(ref(a) / (k / (lam - a)) - 1) < 1e-11, (seed, a)
        v, ref = reference("ps2_concentration", seed)
        k, lam = v["shape"], v["lam"]
        for a in v["q1_tilts"]:
            c = lam - 2 * a
            exact = ((lam - a) ** 2 / (lam * c)) ** k * (k / c**2 + (k / c - k / (lam - a)) ** 2)
            assert abs(ref(a) / exact - 1) < 1e-11, (seed, a)


def test_a_variant_draws_the_rate_from_a_continuous_range():
    rates = [problem_sets.parameters(s)["ps1_measures"]["lam"] for s in range(200)]
    lo, hi = problem_sets.RATES
    d = problem_sets.DEFAULT_RATE
    assert all(lo <= r <= hi and abs(r - d) >= 0.05 * d for r in rates), rates
    assert len(set(rates)) > 150, len(
        set(rates)
    )  # three significant digits, not a handful of values
    assert min(rates) < 0.4 and max(rates) > 3, (min(rates), max(rates))
    for s in range(20):  # both sets that use it take the same rate
        assert problem_sets.parameters(s)["ps2_concentration"]["lam"] == rates[s]


def test_point_labels_are_singular_for_one_point():
    assert problem_sets.points_label(1) == "1 point"
    assert problem_sets.points_label(1.0) == "1 point"
    assert problem_sets.points_label(0.5) == "0.5 points"
    assert problem_sets.points_label(2) == "2 points"
    for name in SETS:
        text = problem_sets.rubric(name) + (problem_sets.SOURCES / f"{name}.md").read_text()
        assert not re.search(r"(?<![\d.])1 points", text), name


def test_the_rubric_gives_each_hidden_test_its_points_and_they_add_up_to_the_question():
    """An autograded question's points are all on its hidden tests (the public ones carry none): the
    rubric lists each hidden test with its points and what it checks, and they sum to the question's."""
    for name in SETS:
        tests = problem_sets.hidden_tests(name)
        auto = {q["name"]: q["points"] for q in problem_sets.questions(name) if not q["manual"]}
        assert set(tests) == set(auto), (
            f"{name}: autograded {sorted(auto)}, hidden tests {sorted(tests)}"
        )
        text = problem_sets.rubric(name)
        for q, rows in tests.items():
            total = sum(points for points, _ in rows)
            assert abs(total - auto[q]) < 1e-9, (
                f"{name} {q}: hidden tests {total:g}, question {auto[q]:g}"
            )
            for points, message in rows:
                assert message, f"{name} {q}: a hidden test has no failure message"
                assert (
                    f"| {q} | {points:g} | {message.replace('|', problem_sets.PIPE)} |" in text
                ), (name, q)


# The derivation each autograded question rests on, graded by hand, where a numerical method passes the code.
DERIVATIONS = {
    "ps1_measures": ("q1a", "q2a"),
    "ps2_concentration": ("q1a", "q2a"),
    "ps3_regression": ("q2a", "q3a"),
}


def test_derivations_are_graded_by_hand_and_say_numerics_earn_no_credit_for_them():
    for name, derivations in DERIVATIONS.items():
        qs = {q["name"]: q for q in problem_sets.questions(name)}
        text = (problem_sets.SOURCES / f"{name}.md").read_text()
        assert "no credit for its derivation" in text, name  # the opening paragraph says it
        for d in derivations:
            assert qs[d]["manual"], (name, d)
            computed = qs[d[:-1]]  # q1a -> q1, the autograded question it backs
            assert not computed["manual"], (name, d)
            # about a third to two thirds of the question's points are for the derivation
            share = qs[d]["points"] / (qs[d]["points"] + computed["points"])
            assert 1 / 3 <= share <= 2 / 3, (name, d, share)
            block = text.split(f"name: {d}\n", 1)[1].split("# END QUESTION", 1)[0]
            block = " ".join(block.split())  # the words, whatever the line breaks
            assert "show your derivation" in block and "no credit here" in block, (name, d)
            assert "No credit" in block.split("**Rubric", 1)[1], (name, d)


def test_the_gradebook_has_a_row_per_submission(tmp_path):
    qs = problem_sets.questions("ps1_measures")
    auto = [q for q in qs if not q["manual"]]
    result = {
        "questions": {q["name"]: (q["points"] / 2, q["points"]) for q in auto},
        "auto": (sum(q["points"] for q in auto) / 2, sum(q["points"] for q in auto)),
        "manual_possible": {q["name"]: q["points"] for q in qs if q["manual"]},
    }
    path = tmp_path / "grades.csv"
    problem_sets.write_gradebook(path, "ps1_measures", [("a.ipynb", result), ("b.ipynb", result)])
    rows = list(csv.DictReader(path.open()))
    assert [r["file"] for r in rows] == ["a.ipynb", "b.ipynb"]
    for q in qs:  # the autograded points per question; the manual ones left for the grader
        assert rows[0][q["name"]] == ("" if q["manual"] else f"{q['points'] / 2:g}"), q
    assert list(rows[0])[len(qs) + 1 :] == [
        "auto_awarded",
        "auto_possible",
        "manual_awarded",
        "manual_possible",
        "total_awarded",
        "total_possible",
        "comments",
    ]
    assert float(rows[0]["auto_awarded"]) == 1.5 and float(rows[0]["auto_possible"]) == 3
    assert rows[0]["manual_awarded"] == ""  # for the grader to fill in
    assert float(rows[0]["manual_possible"]) == 7 and float(rows[0]["total_possible"]) == 10
    # the shipped grade_all.py writes the same file from the same points (its functions write both)
    grade_all = problem_sets.grade_all_module()
    assert grade_all.__file__ == str(problem_sets.GRADE_ALL)
    assert list(rows[0]) == grade_all.gradebook_header(qs)
    awarded = {q: s for q, (s, _) in result["questions"].items()}
    shipped = tmp_path / "shipped.csv"
    grade_all.write_gradebook(shipped, qs, [("a.ipynb", awarded), ("b.ipynb", awarded)])
    assert shipped.read_text() == path.read_text()
    with pytest.raises(ValueError, match=r"awarded: points for \['q1a'\] of a.ipynb, expected"):
        grade_all.gradebook_row("a.ipynb", qs, {**awarded, "q1a": 1.0})  # a question graded by hand


@pytest.mark.parametrize("seed", [None, 1, 2, VARIANT])
def test_every_placeholder_has_a_value_and_a_variant_changes_the_numbers(seed):
    default = problem_sets.parameters()
    values = problem_sets.parameters(seed)
    for name in SETS:
        text = problem_sets.source(name, seed)  # raises on a placeholder without a value, or unused
        assert "{{" not in text and problem_sets.questions(name, seed), name
        title = next(line for line in text.splitlines() if line.startswith("# Problem set"))
        assert ("(variant" in title) == (seed is not None), (name, title)
        if seed is not None:
            changed = [k for k in values[name] if values[name][k] != default[name][k]]
            assert len(changed) > 3, (name, changed)
    if seed is not None:  # set 1's two-point law, the one number a student computes by hand
        assert values["ps1_measures"]["mean"] != default["ps1_measures"]["mean"] or (
            values["ps1_measures"]["tilt"] != default["ps1_measures"]["tilt"]
        )


@pytest.mark.parametrize("seed", [1, 2, VARIANT])
def test_a_variant_asks_set_1_question_2_about_another_law_of_the_family(seed):
    """The default set's tokens are exponential (Gamma of shape 1); a variant's are Gamma of shape 2 or 3,
    so the public derivation and function do not answer it: its question, solution, hidden reference
    (by quadrature, independent of the formula) and model answer all say so."""
    default = problem_sets.source("ps1_measures")
    assert "the exponential law of rate" in default and "Gamma law" not in default
    k = problem_sets.parameters(seed)["ps1_measures"]["shape"]
    assert k in (2, 3), k
    text = problem_sets.source("ps1_measures", seed)
    assert f"the Gamma law of shape $k = {k}$" in text and "the exponential law of rate" not in text
    assert f"k, lam = {k}, " in text and f"y**({k} - 1)" in text  # the hidden reference
    assert r"\mathrm{Gamma}(k, \lambda - a)" in text and f"here with $k = {k}$" in text
    namespace = {"math": math}
    exec(re.search(r"def tilted_limit\(a\):\n(?:    .*\n)+", text)[0], namespace)
    lam = problem_sets.parameters(seed)["ps1_measures"]["lam"]
    from scipy.integrate import quad

    for a in (-lam, 0.0, 0.5 * lam):  # the tilted Gamma mean, by quadrature
        ref = (
            quad(lambda x, a=a: x**k * math.exp((a - lam) * x), 0, math.inf)[0]
            / quad(lambda x, a=a: x ** (k - 1) * math.exp((a - lam) * x), 0, math.inf)[0]
        )
        assert abs(namespace["tilted_limit"](a) - ref) < 1e-8 * ref, (seed, a)
        # the exponential law's answer is off by (k - 1) / k of it, far beyond the hidden test's 1e-8
        assert abs(1 / (lam - a) - ref) > 0.4 * ref, "the exponential law's answer would pass"


@pytest.mark.parametrize("seed", [1, 2, VARIANT])
def test_a_variant_asks_set_2_question_1_about_set_1_s_law(seed):
    """Set 2's questions 1 and 3 take the tokens of set 1's question 2: in a variant the Gamma law of shape
    2 or 3, so the public closed form (the exponential law's) answers it wrongly. The variant's solution
    is checked against C_1 = E[e^{2aX}(X - T)^2] / (E e^{aX})^2 by quadrature, the public checks' exact
    values are those of the quadrature, and the simulation draws Gamma tokens whose sample mean is k / lam."""
    import torch
    from scipy.integrate import quad

    values = problem_sets.parameters(seed)
    k, lam = values["ps1_measures"]["shape"], values["ps2_concentration"]["lam"]
    assert values["ps2_concentration"]["shape"] == k and lam == values["ps1_measures"]["lam"]
    text = problem_sets.source("ps2_concentration", seed)
    assert f"the Gamma law of shape $k = {k}$" in text and "the exponential law" not in text
    assert f"here with $k = {k}$" in text and f"torch.empty(n, L, {k}).exponential_(" in text
    namespace = {"math": math}
    exec(re.search(r"def tilted_constant\(a\):\n(?:    .*\n)+", text)[0], namespace)

    def moment(t, f):  # E[e^{tX} f(X)] for Gamma(k, lam) tokens, by quadrature
        dens = lam**k / math.factorial(k - 1)
        return quad(lambda x: dens * x ** (k - 1) * math.exp((t - lam) * x) * f(x), 0, math.inf)[0]

    for a in (-lam, 0.0, 0.2 * lam, 0.45 * lam):
        Z = moment(a, lambda x: 1.0)
        T = moment(a, lambda x: x) / Z
        ref = moment(2 * a, lambda x, T=T: (x - T) ** 2) / Z**2
        assert abs(namespace["tilted_constant"](a) - ref) < 1e-8 * ref, (seed, a)
        exponential = (lam * lam - 2 * a * lam + 2 * a * a) / (lam * (lam - 2 * a) ** 3)
        assert abs(exponential - ref) > 0.3 * ref, "the exponential law's answer would pass"
    assert namespace["tilted_constant"](0.5 * lam) == math.inf
    at_minus = re.search(r"_c = (\d+) / \((\d+) \* ", text)
    ref = moment(-2 * lam, lambda x: (x - k / (2 * lam)) ** 2) / moment(-lam, lambda x: 1.0) ** 2
    assert abs(int(at_minus[1]) / (int(at_minus[2]) * lam**2) - ref) < 1e-9 * ref, (at_minus, ref)
    x = torch.empty(4000, 10, k).exponential_(lam, generator=torch.Generator().manual_seed(0))
    mean = float(x.sum(-1).mean())
    assert abs(mean - k / lam) < 5 * math.sqrt(k / 40000) / lam, (mean, k / lam)


def test_the_sets_install_from_the_configured_repository():
    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    for name in SETS:
        assert f"git+{url}@main" in (problem_sets.SOURCES / f"{name}.md").read_text(), name


def test_the_built_sets_pin_softlin_to_a_commit():
    import jupytext

    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    commit = "0123456789abcdef0123456789abcdef01234567"
    for name in SETS:
        nb = problem_sets.pin_setup(
            jupytext.read(problem_sets.SOURCES / f"{name}.md"), commit, name
        )
        code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
        assert f'git+{url}@{commit}"' in code and f"git+{url}@main" not in code, name
        assert f"commit {commit[:12]}" in code, name


def test_the_autograder_config_lists_what_the_sets_import():
    """autograder.zip builds its own environment on Gradescope: the assignment config lists torch,
    scipy and softlin at the commit the setup cell installs."""
    import jupytext

    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    commit = "0123456789abcdef0123456789abcdef01234567"
    for name in SETS:
        nb = jupytext.read(problem_sets.SOURCES / f"{name}.md")
        problem_sets.add_requirements(problem_sets.pin_setup(nb, commit, name), name)
        config = yaml.safe_load(nb.cells[0].source)
        assert config["requirements"] == [
            problem_sets.CPU_TORCH_INDEX,
            f"torch=={problem_sets.TORCH}",
            "scipy",
            f"softlin @ git+{url}@{commit}",
        ], name
        with pytest.raises(SystemExit, match="adds them"):  # not twice
            problem_sets.add_requirements(nb, name)


def test_the_site_gets_the_student_versions_and_nothing_else(tmp_path):
    div = '<div id="problem-set-downloads" class="problem-set-downloads">'
    assert div in (ROOT / "book" / "instructor.md").read_text()
    html = tmp_path / "html"
    (html / "book").mkdir(parents=True)
    (html / "book" / "instructor.html").write_text(
        f"<main>{div}<p>filled by the build</p></div></main>"
    )
    files = problem_sets.publish(html)
    wheel = [f.name for f in files if f.suffix == ".whl"]
    assert len(wheel) == 1 and wheel[0].startswith("softlin-"), files
    assert sorted(f.name for f in files) == sorted(
        [*(f"{name}.ipynb" for name in SETS), "student-versions.zip", *wheel]
    )
    page = (html / "book" / "instructor.html").read_text()
    assert "filled by the build" not in page and "student-versions.zip" in page
    for name in SETS:
        assert f'href="../problem-sets/{name}.ipynb"' in page, name
        text = (html / "problem-sets" / f"{name}.ipynb").read_text()
        for secret in (
            "SOLUTION",
            "hidden: true",
            "**Model answer",
            "**Rubric",
            "mu4 - 3 * var**2",
        ):
            assert secret not in text, (name, secret)
    with zipfile.ZipFile(html / "problem-sets" / "student-versions.zip") as z:
        assert sorted(z.namelist()) == sorted([f"{name}.ipynb" for name in SETS] + wheel)
    assert f'href="../problem-sets/{wheel[0]}"' in page


def test_otter_grader_is_pinned():
    assert re.search(r"^otter-grader==\d", (ROOT / "requirements.txt").read_text(), re.M)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("problem-sets")
    rc = problem_sets.main(["--out", str(out)])
    assert rc == 0
    return out


def _replace(built: Path, tmp_path: Path, name: str, starts: str, source: str) -> Path:
    """The solution of set ``name`` with the code cell that starts with ``starts`` replaced."""
    nb = json.loads((built / name / "autograder" / f"{name}.ipynb").read_text())
    hits = [c for c in nb["cells"] if "".join(c["source"]).startswith(starts)]
    assert len(hits) == 1, (name, starts)
    hits[0]["source"] = source
    path = tmp_path / f"{name}.ipynb"
    path.write_text(json.dumps(nb))
    return path


# Plausible wrong answers: (set, question, the cell replaced, the wrong cell).
WRONG = {
    "ps1 fourth central moment for kappa_4": (
        "ps1_measures",
        "q1",
        "def tilt_coefficients",
        "def tilt_coefficients(x, p):\n"
        "    c = x - p @ x\n"
        "    return float(p @ c**3 / 2), float(p @ c**4 / 6)\n",
    ),
    "ps2 Gaussian constant for Exp(1) tokens": (
        "ps2_concentration",
        "q1",
        "def tilted_constant",
        "def tilted_constant(a):\n    return math.exp(a * a) * (1 + a * a)\n",
    ),
    "ps2 the centred queries' constant, no mean": (
        "ps2_concentration",
        "q2",
        "def averaged_constant",
        "def averaged_constant(U, V, Gamma, m_q):\n"
        "    K = torch.eye(len(m_q)) - 2 * U.T @ Gamma @ U\n"
        "    if float(torch.linalg.eigvalsh(K).min()) <= 0:\n"
        "        return math.inf\n"
        "    B = U.T @ Gamma @ V.T @ V @ Gamma @ U\n"
        "    t = torch.trace(V @ Gamma @ V.T) + torch.trace(B @ torch.linalg.inv(K))\n"
        "    return float(torch.linalg.det(K) ** -0.5 * t)\n",
    ),
    "ps3 a guessed c = 1/4": (
        "ps3_regression",
        "q2",
        "def best_c",
        "def best_c(d):\n    return 0.25\n\n\n"
        "def best_ratio(d):\n"
        "    c = best_c(d)\n"
        "    return (1 - c) / (c * (1 - 2 * c) ** (d / 2 + 1) * (d + 1))\n",
    ),
    # the theorem's cap sqrt(2) / (d^(1/4) ||Sigma||_op) in place of the largest start: a sufficient
    # alpha, not the largest (equal only by accident)
    "ps3 q3 the theorem's cap, not the largest start": (
        "ps3_regression",
        "q3",
        "def largest_start",
        "def largest_start(Sigma, Pi):\n"
        "    d = Sigma.shape[0]\n"
        "    return math.sqrt(2) / (d**0.25 * float(torch.linalg.matrix_norm(Sigma, ord=2)))\n",
    ),
    # the factor 2 of the cross term dropped: alpha_max / sqrt(2)
    "ps3 q3 the factor 2 dropped": (
        "ps3_regression",
        "q3",
        "def largest_start",
        "def largest_start(Sigma, Pi):\n"
        "    SP = Sigma @ Pi\n"
        "    return math.sqrt(float(torch.trace(SP @ Sigma)) / float(torch.trace(SP @ SP @ Sigma)))\n",
    ),
}


# Answers at exactly the precision a question asks for: full marks on it (set, question, cell, answer).
def _tilted_mean(values: dict) -> float:
    """The answer to set 1's question 3 for these inputs: the two-point law's tilted mean."""
    w1 = values["p1"] * math.exp(values["tilt"] * values["x1"])
    w2 = values["p2"] * math.exp(values["tilt"] * values["x2"])
    return (w1 * values["x1"] + w2 * values["x2"]) / (w1 + w2)


ROUNDED = {
    "ps1 q3 to three significant digits": (
        "ps1_measures",
        "q3",
        "# BEGIN SOLUTION NO PROMPT",
        f"two_point_limit = {_tilted_mean(problem_sets.parameters()['ps1_measures']):.3g}\n",
    ),
}


# Shortcuts: answers that do not do what the question asks, and score nothing on it (its public check
# included): (set, question, the cell replaced, the shortcut).
_C1 = (
    "(lam * lam - 2 * a * lam + 2 * a * a) / (lam * (lam - 2 * a) ** 3)"  # set 2's C_1(a), typed in
)
_LIBRARY_PHI = (
    "    A, b = icl.bayes_optimal_parameters(Sigma)\n"
    "    return 2 * {f}(A, b, Sigma, noise_var=0.0, allow_infinite=True) / (\n"
    "        (Sigma.shape[0] + 1) * float(Sigma.trace())\n"
    "    )\n"
)
SHORTCUTS = {
    "ps2 a typed constant, not a simulation": (
        "ps2_concentration",
        "q3",
        "def simulate_constant",
        "def simulate_constant(n, seed):\n"
        "    lam, a = 1, 0.2\n"
        f"    c1 = {_C1}\n"
        "    return c1, 1.5 * c1 / math.sqrt(n)\n",
    ),
    "ps2 C_1 plus noise drawn from the seed, not a simulation": (
        "ps2_concentration",
        "q3",
        "def simulate_constant",
        "def simulate_constant(n, seed):\n"
        "    lam, a = 1, 0.2\n"
        f"    c1 = {_C1}\n"
        "    se = 0.05 * c1 * math.sqrt(4000 / n)  # the spread of an honest estimate\n"
        "    z = float(torch.randn(1, generator=torch.Generator().manual_seed(seed)))\n"
        "    return c1 + z * se, se\n",
    ),
    "ps2 a simulation at the seeds one tries (0, 1, 2), a typed number elsewhere": (
        "ps2_concentration",
        "q3",
        "def simulate_constant",
        "def simulate_constant(n, seed):\n"
        "    if seed not in (0, 1, 2):\n"
        "        return 3.15, 0.076  # the estimate at seed 0, n = 4000, typed in\n"
        "    lam, a, L = 1, 0.2, 1000\n"
        "    x = torch.empty(n, L, 1).exponential_(lam, generator=torch.Generator().manual_seed(seed))\n"
        "    sq = L * ((torch.softmax(a * x[..., 0], dim=1) * x[..., 0]).sum(1) - 1 / (lam - a)) ** 2\n"
        "    return float(sq.mean()), float(sq.std() / math.sqrt(n))\n",
    ),
    "ps3 q1 by the library's fluctuation constant": (
        "ps3_regression",
        "q1",
        "def ratio_at_optimum",
        "def ratio_at_optimum(Sigma):\n" + _LIBRARY_PHI.format(f="icl.risk_fluctuation_constant"),
    ),
    "ps3 q1 by the library's constant, imported under another name": (
        "ps3_regression",
        "q1",
        "def ratio_at_optimum",
        "from softlin.icl import risk_fluctuation_constant as phi\n\n\n"
        "def ratio_at_optimum(Sigma):\n" + _LIBRARY_PHI.format(f="phi"),
    ),
    # the plain mean p1 x1 + p2 x2 (no tilt), as rounding leaves it: its public check must see it
    "ps1 q3 the untilted mean": (
        "ps1_measures",
        "q3",
        "# BEGIN SOLUTION NO PROMPT",
        "two_point_limit = {p1} * {x1} + {p2} * {x2}\n".format(
            **problem_sets.parameters()["ps1_measures"]
        ),
    ),
    "ps3 q4 by the library's large-prompt constants": (
        "ps3_regression",
        "q4",
        "def noisy_ratio",
        "def noisy_ratio(d, rho):\n"
        "    return icl.large_prompt_constants(torch.eye(d), noise_var=rho * d).ratio\n",
    ),
}


@pytest.mark.book
@pytest.mark.parametrize("label", SHORTCUTS)
def test_a_shortcut_scores_nothing_on_its_question(built, tmp_path, label):
    name, question, starts, source = SHORTCUTS[label]
    graded = problem_sets.grade(name, _replace(built, tmp_path, name, starts, source), built)
    score, possible = graded["questions"][question]
    assert score == 0 < possible, (label, graded)
    # the other questions keep their points: the shortcut broke nothing else
    others = [s == p for q, (s, p) in graded["questions"].items() if q != question]
    assert all(others), (label, graded)


# Answers right in part: the hidden checks that the right part passes give their points, and each
# failed hidden check's message names the part that failed: (set, question, the cell replaced, the
# answer, its points on the question, the start of each failed hidden check's message).
_SIM = problem_sets.parameters()["ps2_concentration"]
_SIMULATION = (  # set 2's question 3 with the default set's numbers, n and the standard error as given
    "def simulate_constant(n, seed):\n"
    f"    lam, a, L = {_SIM['lam']}, {_SIM['q3_a']}, {_SIM['q3_L']}\n"
    "{n}"
    "    g = torch.Generator().manual_seed(seed)\n"
    "    tokens = torch.empty(n, L, 1).exponential_(lam, generator=g)\n"
    "    out = sl.softmax_attention(tokens, torch.ones(n, 1, 1), a * torch.eye(1), torch.eye(1))[:, 0, 0]\n"
    "    sq = L * (out - 1 / (lam - a)) ** 2\n"
    "    return float(sq.mean()), {se}\n"
)
_STDERR_FAILED = "The standard error (the pair's second element) is not the standard deviation"
PARTIAL = {
    # the estimate right everywhere, the standard error without its / sqrt(n): 1 of 1.5
    "ps2 q3 the standard deviation for the standard error": (
        "ps2_concentration",
        "q3",
        "def simulate_constant",
        _SIMULATION.format(n="", se="float(sq.std())"),
        1.0,
        (_STDERR_FAILED,),
    ),
    # 4 000 prompts whatever n is asked: right only at the hidden seed's n = 4 000, for the estimate
    "ps2 q3 n fixed at 4 000": (
        "ps2_concentration",
        "q3",
        "def simulate_constant",
        _SIMULATION.format(n="    n = 4000\n", se="float(sq.std() / math.sqrt(n))"),
        0.5,
        ("At other seeds and sizes the estimate", _STDERR_FAILED),
    ),
}


@pytest.mark.book
@pytest.mark.parametrize("label", PARTIAL)
def test_an_answer_right_in_part_earns_that_part_s_points(built, tmp_path, label):
    name, question, starts, source, points, messages = PARTIAL[label]
    graded = problem_sets.grade(name, _replace(built, tmp_path, name, starts, source), built)
    assert graded["questions"][question][0] == points, (label, graded)
    hidden = [m for is_hidden, m in graded["failed"][question] if is_hidden]
    assert len(hidden) == len(messages), (label, hidden)
    for start in messages:
        assert any(m.startswith(start) for m in hidden), (label, start, hidden)
    others = [s == p for q, (s, p) in graded["questions"].items() if q != question]
    assert all(others), (label, graded)


@pytest.mark.book
def test_the_sets_build_and_grade_without_docker(built, tmp_path):
    assert (built / "README.md").exists() and (built / "student-versions.zip").exists()
    report = {}
    for name in SETS:
        result = built / name
        student = json.loads((result / "student" / f"{name}.ipynb").read_text())
        code = "\n".join("".join(c["source"]) for c in student["cells"] if c["cell_type"] == "code")
        assert "SOLUTION" not in code and "mu4 - 3 * var**2" not in code, name
        assert "hidden: true" not in json.dumps(student["metadata"]), f"{name}: hidden tests leak"
        assert "**Rubric" in (result / "rubric.md").read_text()
        with zipfile.ZipFile(result / "autograder" / "autograder.zip") as z:
            env = yaml.safe_load(z.read("environment.yml"))
            inside = z.namelist()
        pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
        assert f"torch=={problem_sets.TORCH}" in pip and "scipy" in pip, (name, pip)
        # Gradescope installs the kit's own softlin, from the wheel inside the zip (a fork's too)
        wheel = next(built.glob("softlin-*.whl")).name
        assert wheel in inside, (name, inside)
        assert f"{problem_sets.AUTOGRADER_SOURCE}/{wheel}" in pip, (name, pip)
        assert not any(p.startswith("softlin @") for p in pip), (name, pip)
        solution = problem_sets.grade(name, result / "autograder" / f"{name}.ipynb", built)
        blank = problem_sets.grade(name, result / "student" / f"{name}.ipynb", built)
        assert solution["auto"][0] == solution["auto"][1] > 0, (name, solution)
        assert blank["auto"][0] == 0, (name, blank)
        report[name] = {
            "solution": solution["auto"],
            "blank": blank["auto"],
            "manual_possible": solution["manual_possible"],
        }
    # a submission saved under another name (the setup cell opens <name>.ipynb) grades the same
    renamed = tmp_path / "alice.ipynb"
    renamed.write_bytes(
        (built / "ps3_regression" / "autograder" / "ps3_regression.ipynb").read_bytes()
    )
    as_alice = problem_sets.grade("ps3_regression", renamed, built)
    assert as_alice["auto"] == report["ps3_regression"]["solution"], as_alice
    for label, (name, question, starts, source) in WRONG.items():
        wrong = problem_sets.grade(name, _replace(built, tmp_path, name, starts, source), built)
        score, possible = wrong["questions"][question]
        # a hidden test fails: not all of the question's points (public tests carry none)
        assert score < possible, (label, wrong)
        assert wrong["auto"][0] < wrong["auto"][1], (label, wrong)
        report[f"{name} ({label})"] = {"wrong": wrong["auto"], question: (score, possible)}
    for label, (name, question, starts, source) in ROUNDED.items():
        rounded = problem_sets.grade(name, _replace(built, tmp_path, name, starts, source), built)
        score, possible = rounded["questions"][question]
        assert score == possible > 0, (label, rounded)
    gradebook = tmp_path / "grades.csv"
    solution = built / "ps1_measures" / "autograder" / "ps1_measures.ipynb"
    blank = built / "ps1_measures" / "student" / "ps1_measures.ipynb"
    args = ["--grade", "ps1_measures", "--out", str(built), "--csv", str(gradebook)]
    assert problem_sets.main([*args, str(solution), str(blank)]) == 0
    rows = list(csv.DictReader(gradebook.open()))
    assert [r["file"] for r in rows] == [str(solution), str(blank)], rows
    assert (
        rows[0]["auto_awarded"] == rows[0]["auto_possible"] == "3"
        and rows[1]["auto_awarded"] == "0"
        and rows[1]["manual_awarded"] == ""
        and rows[1]["total_possible"] == "10"
    )
    assert rows[0]["q1"] == "1.5" and rows[0]["q1a"] == "", rows[0]
    path = ROOT / "_build" / "kit-report.json"
    path.parent.mkdir(exist_ok=True)
    old = json.loads(path.read_text()) if path.exists() else {}
    path.write_text(json.dumps({**old, "problem_sets": report}, indent=1))
    print(json.dumps(report, indent=1))


def test_each_set_has_a_solution_sheet_without_its_tests_that_earns_full_marks(built, tmp_path):
    """NAME/solutions/NAME-solutions.ipynb (and .html), to hand to students after the deadline: every
    model answer of the solution notebook and no test (no case's code or message, public or hidden,
    and no otter markup), executed (each computation prints its values, nothing raises); graded as a submission, it earns every autograded point, so its code is
    the solution's."""
    for name in SETS:
        folder = built / name / "solutions"
        sheet, page = folder / f"{name}-solutions.ipynb", folder / f"{name}-solutions.html"
        assert sheet.exists() and page.exists(), f"{name}: no solution sheet in {folder}"
        assert list(folder.glob("softlin-*.whl")), f"{name}: no softlin wheel beside the sheet"
        nb = json.loads(sheet.read_text())
        text = json.dumps(nb)
        assert "otter" not in nb["metadata"], f"{name}: the sheet's metadata keeps otter's tests"
        for case, spec in _autograder_cases(built, name).items():
            message = str(spec.get("failure_message") or "").strip()
            assert not message or json.dumps(message)[1:-1] not in text, (name, case, message)
        assert ">>> " not in text and "grader.check" not in text, f"{name}: a test in the sheet"
        code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
        assert "otter" not in code and "SOLUTION" not in code, f"{name}: otter markup in the sheet"
        # executed: every cell that answers a computation (defines a function) prints its values
        silent = [
            "".join(c["source"])[:60]
            for c in nb["cells"]
            if c["cell_type"] == "code" and "def " in "".join(c["source"]) and not c["outputs"]
        ]
        assert not silent, f"{name}: cells of the sheet that show no numbers: {silent}"
        errors = [
            o for c in nb["cells"] for o in c.get("outputs", []) if o["output_type"] == "error"
        ]
        assert not errors, f"{name}: the sheet raises: {errors}"
        solution = json.loads((built / name / "autograder" / f"{name}.ipynb").read_text())
        answers = [
            "".join(c["source"])
            for c in solution["cells"]
            if "otter_assign_solution_cell" in c["metadata"].get("tags", [])
            and not "".join(c["source"]).startswith("**What a full-mark report")
        ]
        sources = "\n".join("".join(c["source"]) for c in nb["cells"])
        missing = [a[:60] for a in answers if a.strip() not in sources]
        assert answers and not missing, (name, f"model answers not in the sheet: {missing}")
        html = page.read_text()
        assert "calibration" not in html, f"{name}: the report's calibration is the graders'"
        assert '<script defer src="../../mathjax/startup.js"' in html, f"{name}: MathJax not local"
        assert not re.search(r'<script src="https?://', html), f"{name}: a script from the network"
        # graded as a submission (otter needs the set's name in the metadata), it gets full marks
        nb["metadata"]["otter"] = {"assignment_name": name}
        copy = tmp_path / f"{name}.ipynb"
        copy.write_text(json.dumps(nb))
        graded = problem_sets.grade(name, copy, built)
        assert graded["auto"][0] == graded["auto"][1] > 0, (name, "the sheet's code", graded)


@pytest.mark.browser
def test_the_solution_sheets_typeset_their_formulas_offline(built):
    """Each sheet's HTML loads the book's MathJax from the copy beside the sets (``mathjax/``), not a
    CDN: in headless Chromium with every network request refused, its formulas are typeset, none in
    error, and no ``$`` of TeX is left in its text."""
    from conftest import CHROMIUM_ARGS, chromium_path
    from playwright.sync_api import sync_playwright

    assert (built / "mathjax" / "startup.js").exists(), "no MathJax beside the sets"
    requests: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        context = browser.new_context()
        context.route(re.compile(r"^(https?|wss?)://"), lambda route: route.abort())
        page = context.new_page()
        page.on("request", lambda r: requests.append(r.url))
        for name in SETS:
            page.goto((built / name / "solutions" / f"{name}-solutions.html").as_uri())
            page.wait_for_function("window.MathJax && MathJax.startup && MathJax.startup.promise")
            page.evaluate("MathJax.startup.promise")
            typeset = page.evaluate("document.querySelectorAll('mjx-container').length")
            errors = page.evaluate("document.querySelectorAll('mjx-merror').length")
            raw = page.evaluate(r"document.body.innerText.match(/\$[^$\n]{1,60}\$/g) || []")
            assert typeset > 20 and not errors and not raw, (name, typeset, errors, raw[:3])
            # printed, no line of code or output runs off the page behind a scroll bar
            page.emulate_media(media="print")
            page.set_viewport_size({"width": 700, "height": 1000})  # about an A4 page's width
            clipped = page.evaluate(
                "[...document.querySelectorAll('pre')]"
                ".filter(e => e.scrollWidth > e.clientWidth + 1).length"
            )
            page.emulate_media(media="screen")
            assert clipped == 0, f"{name}: {clipped} blocks of code run off the printed page"
        browser.close()
    assert not [u for u in requests if not u.startswith("file:")], requests


def test_the_kit_readme_pins_the_torch_it_was_tested_with():
    pin = re.search(r"^torch==(\S+)", (ROOT / "requirements.txt").read_text(), re.M)
    assert pin and problem_sets.TORCH == pin.group(1), (problem_sets.TORCH, pin)


@pytest.mark.book
def test_grade_all_writes_a_gradebook_and_feedback_without_the_tests(built, tmp_path):
    """The kit's grade_all.py (shipped beside the sets, run from there, without the repository) grades a
    folder: the solution gets every autograded point and a blank copy none, in the CSV; each student's
    feedback gives the points and the failed checks' messages, and none of the tests' code."""
    import csv

    assert (built / "grade_all.py").exists() and "grade_all.py" in (built / "README.md").read_text()
    kit_readme = (built / "README.md").read_text()
    assert (built / "final_grades.py").exists() and "python final_grades.py graded/" in kit_readme
    assert "final_grades.py graded/ --interim" in kit_readme, "the README omits interim grades"
    wheels = [
        n for n in zipfile.ZipFile(built / "student-versions.zip").namelist() if n.endswith(".whl")
    ]
    assert len(wheels) == 1, (
        "student-versions.zip should carry the softlin wheel the setup cells install"
    )
    name = "ps1_measures"
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copyfile(built / name / "autograder" / f"{name}.ipynb", subs / "solution.ipynb")
    shutil.copyfile(built / name / "student" / f"{name}.ipynb", subs / "blank.ipynb")
    out = run_grade_all(built, name, subs, tmp_path)
    shipped = out / f"grades-{name}.csv"
    rows = {r["file"]: r for r in csv.DictReader(shipped.open())}
    total, auto = problem_sets.points(name)
    assert float(rows["solution.ipynb"]["auto_awarded"]) == auto > 0, rows
    assert float(rows["blank.ipynb"]["auto_awarded"]) == 0, rows
    assert rows["blank.ipynb"]["manual_awarded"] == "" and rows["blank.ipynb"]["q1a"] == ""
    assert float(rows["blank.ipynb"]["total_possible"]) == total, rows
    # the same gradebook as `problem_sets.py --grade --csv` on the same submissions: same header, same
    # points (the file column apart: grade_all names the file, --grade the path it was given)
    questions = json.loads((built / name / "questions.json").read_text())
    assert questions == problem_sets.questions(name)
    repo_csv = tmp_path / "repo-grades.csv"
    files = [str(subs / "blank.ipynb"), str(subs / "solution.ipynb")]  # grade_all's order
    args = ["--grade", name, "--out", str(built), "--csv", str(repo_csv), *files]
    assert problem_sets.main(args) == 0
    with shipped.open() as a, repo_csv.open() as b:
        ours, theirs = list(csv.reader(a)), list(csv.reader(b))
    assert ours[0] == theirs[0], (ours[0], theirs[0])
    assert [r[1:] for r in ours[1:]] == [r[1:] for r in theirs[1:]], (ours, theirs)
    assert [r[0] for r in ours[1:]] == ["blank.ipynb", "solution.ipynb"]
    blank = (out / "feedback" / name / "blank.md").read_text()
    # every autograded answer of the blank copy is still "...": said so, without the errors the
    # missing answers raise in the checks (a TypeError on None would only puzzle its student)
    for q in (q["name"] for q in questions if not q["manual"]):
        assert re.search(rf"\*\*{q}\*\* \(0 of [^)]*\): not answered", blank), (q, blank)
    assert "Error" not in blank and "0 of" in blank, blank
    for text in (blank, (out / "feedback" / name / "solution.md").read_text()):
        assert not re.search(r"\bassert\b|Trying:|Traceback|_quad|torch\.", text), text
        for message in _hidden_messages(built, name):  # the blank copy fails every hidden check
            assert message not in text, message
    solution = (out / "feedback" / name / "solution.md").read_text()
    assert not re.search(r"checks? failed[.:]", solution) and "| 0 | 0 |" in solution, solution
    # the README and grade_all's docstring say what the feedback holds
    assert "only how many hidden checks failed" in (built / "README.md").read_text()
    # --completion: answers in a student's own words (naming the model answer's terms) get their
    # points, the blank copy's placeholders 0; the solution's are the model answers, so they are
    # named as near-copies and left unmarked
    grade_all = problem_sets.grade_all_module()
    own = json.loads((subs / "solution.ipynb").read_text())
    model = grade_all.model_answers(built / name / "rubric.md")
    by_hand = grade_all.answers_by_hand(own)  # the cells themselves: edited in place
    for q, cells in by_hand.items():
        for k, cell in enumerate(cells):
            if "otter_assign_solution_cell" in cell["metadata"].get("tags", []):
                terms = sorted(grade_all.key_terms(model.get(q, "")))[:3]
                cell["source"] = (
                    f"My own answer, part {k}: I wrote this from the lesson's argument, in words "
                    f"that are mine, about {', '.join(terms) or 'the report'}, with the steps that "
                    "I needed to convince myself, the first of them $T = \\Lambda'(a)$ (a "
                    "derivation shows a formula: one with none is left for the grader)."
                )
    # the blank set with one answer of filler (not own's other answers: two students' answers
    # alike are near-copies, left unmarked)
    filler = json.loads((built / name / "student" / f"{name}.ipynb").read_text())
    first = next(q for q in by_hand if q in model)
    for cell in grade_all.answers_by_hand(filler)[first]:
        if "".join(cell.get("source", [])).strip() == grade_all.PLACEHOLDER:
            cell["source"] = (
                "I computed it with autograd and the code above works, so the result is right "
                "and matches the checks that the notebook runs on every input it was given."
            )  # 29 words: not thin for a question of 1.5 points (15 words a point)
    (subs / "own.ipynb").write_text(json.dumps(own))
    (subs / "filler.ipynb").write_text(json.dumps(filler))
    done = run_grade_all(built, name, subs, tmp_path, "--reuse", "--completion", check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {r["file"]: r for r in csv.DictReader(shipped.open())}
    manual = [q["name"] for q in questions if q["manual"]]
    assert float(rows["own.ipynb"]["total_awarded"]) == total, rows["own.ipynb"]
    # filler names none of the model answer's terms: left for the grader, and named
    assert rows["filler.ipynb"][first] == "" and rows["filler.ipynb"]["total_awarded"] == ""
    assert re.search(rf"filler\.ipynb: answers that name fewer than .*\['{first}'\]", done.stderr)
    assert float(rows["blank.ipynb"]["total_awarded"]) == 0, rows["blank.ipynb"]
    assert [rows["solution.ipynb"][q] for q in manual] == [""] * len(manual), rows
    copies = re.search(r"solution\.ipynb: near-copies.*", done.stderr)
    assert copies and all(f"{q} alike the model answer" in copies[0] for q in manual), done.stderr
    assert "own.ipynb: near-copies" not in done.stderr, done.stderr
    assert "--completion" in (built / "README.md").read_text()
    # the marks just entered, unread, are not in the feedback yet; --reuse, once read, puts them in
    own_feedback = out / "feedback" / name / "own.md"
    assert "| question graded by hand |" not in own_feedback.read_text(), own_feedback.read_text()
    assert "run again with --reuse" in done.stderr, done.stderr[-2000:]
    run_grade_all(built, name, subs, tmp_path, "--reuse")
    assert f"Total: {total:g} of {total:g}" in own_feedback.read_text(), own_feedback.read_text()
    # once returned, the feedback says which marks are for completion, and quotes the rubric's
    # criterion for full credit for the student to check the answer against the solution sheet
    returned = own_feedback.read_text()
    assert "for completion: an answer was written; not checked for correctness" in returned, (
        returned
    )
    assert "for full credit, the rubric asks for" in returned and f"- **{first}**: " in returned
    assert json.loads((out / f"completion-{name}.json").read_text())["own.ipynb"], "no record"
    # --except-question leaves a question for its rubric, and its near-copies are still named; the
    # collated files say, above each answer, what the completion pass did with it
    done = run_grade_all(
        built,
        name,
        subs,
        tmp_path,
        "--reuse",
        "--completion",
        "--except-question",
        "q4",
        "--collate",
        "--no-rerun",
        check=False,
    )
    copies = re.search(r"solution\.ipynb: near-copies.*", done.stderr)
    assert copies and "q4 alike the model answer" in copies[0], done.stderr[-3000:]
    # own's marks, read and returned before this second --completion run (a late student, say),
    # stay in its feedback: only the marks this run enters wait for --reuse
    returned = own_feedback.read_text()
    assert "| question graded by hand |" in returned and f"Total: {total:g}" in returned, returned
    q4 = (out / "by-question" / f"{name}-q4.md").read_text().split("## own.ipynb")[1]
    assert "*Completion: left for you: marked by its rubric (--except-question).*" in q4, q4
    q1a = (out / "by-question" / f"{name}-q1a.md").read_text()
    assert (
        "*Completion: left for you: it holds the model answer (below).*"
        in q1a.split("## solution.ipynb")[1].split("## ")[0]
    ), q1a
    assert (
        "*Completion: marked for completion: 0 (read it over).*"
        in q1a.split("## blank.ipynb")[1].split("## ")[0]
    ), q1a


def test_grade_all_merges_the_gradebook_keeps_hand_marks_and_collates_answers(built, tmp_path):
    """Grading again (a late submission, or one file regraded) merges into the gradebook: the other rows
    and every hand mark stay; ``--reuse`` rewrites the feedback from the kept results, with the hand
    marks; ``--collate`` writes each hand-graded question's answers across the class."""
    import csv

    name = "ps1_measures"
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copyfile(built / name / "autograder" / f"{name}.ipynb", subs / "alice.ipynb")
    blank = json.loads((built / name / "student" / f"{name}.ipynb").read_text())
    answer = next(c for c in blank["cells"] if "otter_answer_cell" in c["metadata"].get("tags", []))
    answer["source"] = "Bob's derivation: the cumulants of order 3 and 4."
    (subs / "bob.ipynb").write_text(json.dumps(blank))
    out = run_grade_all(built, name, subs, tmp_path, "--collate")
    gradebook = out / f"grades-{name}.csv"
    rows = list(csv.DictReader(gradebook.open()))
    manual = [q["name"] for q in problem_sets.questions(name) if q["manual"]]
    # the grader's entries: for alice one mark and a typed sum (a grade for completion, say), for
    # bob every hand mark, which the script adds up
    rows[0]["q1a"], rows[0]["manual_awarded"] = "1", "6"
    rows[0]["comments"] = "Clear derivation; say why t2 vanishes."
    rows[1].update(dict.fromkeys(manual, "0.5"))
    with gradebook.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    late = tmp_path / "late"
    late.mkdir()
    shutil.copyfile(subs / "bob.ipynb", late / "carol.ipynb")
    run_grade_all(built, name, late, tmp_path)  # a late submission, graded alone
    run_grade_all(built, name, subs, tmp_path, "--reuse")  # the feedback again, with the marks
    after = {r["file"]: r for r in csv.DictReader(gradebook.open())}
    assert sorted(after) == ["alice.ipynb", "bob.ipynb", "carol.ipynb"], after
    total, auto = problem_sets.points(name)
    alice, bob, carol = after["alice.ipynb"], after["bob.ipynb"], after["carol.ipynb"]
    assert alice["q1a"] == "1" and alice["manual_awarded"] == "6"  # the typed sum is kept
    assert float(alice["auto_awarded"]) == auto and float(alice["total_awarded"]) == auto + 6
    assert float(bob["manual_awarded"]) == 0.5 * len(manual)  # added up: every mark is in
    assert float(bob["total_awarded"]) == 0.5 * len(manual)  # bob's autograded points are 0
    assert carol["manual_awarded"] == carol["total_awarded"] == "" and carol["q1a"] == ""
    feedback = (out / "feedback" / name / "alice.md").read_text()
    assert (
        "| q1a | 1 of 1.5 |" in feedback and f"Total: {auto + 6:g} of {total:g} points" in feedback
    )
    assert alice["comments"] == "Clear derivation; say why t2 vanishes."  # kept on regrading
    assert "Comments: Clear derivation; say why t2 vanishes." in feedback, feedback
    assert (
        f"Total: {0.5 * len(manual):g} of {total:g}"
        in (out / "feedback" / name / "bob.md").read_text()
    )
    assert "| question graded by hand |" not in (out / "feedback" / name / "carol.md").read_text()
    # a hand mark above its question's points is flagged, and feeds no total nor feedback
    book_rows = list(csv.DictReader(gradebook.open()))
    q_manual = next(q for q in problem_sets.questions(name) if q["manual"])
    too_many = f"{q_manual['points'] * 2:g}"
    assert book_rows[1]["file"] == "bob.ipynb" and book_rows[1]["manual_awarded"]  # their sum
    for row in book_rows:
        if row["file"] in ("carol.ipynb", "bob.ipynb"):
            row[q_manual["name"]] = too_many
    with gradebook.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(book_rows[0]))
        writer.writeheader()
        writer.writerows(book_rows)
    done = run_grade_all(built, name, late, tmp_path, "--reuse", check=False)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "carol.ipynb: hand marks out of range" in done.stderr, done.stderr[-2000:]
    # named last, after the summary of the run
    assert done.stderr.rstrip().splitlines()[-1].startswith("grade_all: carol.ipynb: hand marks")
    assert f"{q_manual['name']} = {too_many}, expected 0 to {q_manual['points']:g}" in done.stderr
    carol = {r["file"]: r for r in csv.DictReader(gradebook.open())}["carol.ipynb"]
    assert carol["total_awarded"] == "" and carol[q_manual["name"]] == too_many, carol
    bob = {r["file"]: r for r in csv.DictReader(gradebook.open())}["bob.ipynb"]
    # bob's sum was of his marks: with one out of range it is no longer theirs, and is emptied
    assert bob["manual_awarded"] == bob["total_awarded"] == "", bob
    assert f"{too_many} of" not in (out / "feedback" / name / "carol.md").read_text()
    collated = (out / "by-question" / f"{name}-q1a.md").read_text()
    assert "## alice.ipynb" in collated and "Model answer" in collated  # the solution's answer
    assert "**Near-copy: alike the model answer (1.00).**" in collated.split("## bob.ipynb")[0]
    assert "## bob.ipynb" in collated and "Bob's derivation" in collated
    manual = [q["name"] for q in problem_sets.questions(name) if q["manual"]]
    assert sorted(p.stem for p in (out / "by-question").glob("*.md")) == sorted(
        f"{name}-{q}" for q in manual
    )
    # a notebook otter cannot grade is named and left out; the others are graded all the same
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "empty.ipynb").write_text(json.dumps(nbformat.v4.new_notebook()))
    shutil.copyfile(built / name / "autograder" / f"{name}.ipynb", broken / "dave.ipynb")
    done = run_grade_all(built, name, broken, tmp_path, check=False)
    assert done.returncode == 1 and "empty.ipynb: NOT GRADED" in done.stderr, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "dave.ipynb" in gradebook.read_text() and "empty.ipynb" not in gradebook.read_text()
    # one that runs past --timeout is stopped, named and left out the same way
    (broken / "empty.ipynb").unlink()
    done = run_grade_all(built, name, broken, tmp_path, "--timeout", "0.5", check=False)
    assert done.returncode == 1 and "ran past the timeout of 0.5 s" in done.stderr, done.stderr
    # a gradebook of another set's columns is not overwritten
    gradebook.write_text("file,x\nalice.ipynb,1\n")
    done = run_grade_all(built, name, late, tmp_path, check=False)
    assert done.returncode != 0 and "not overwritten" in done.stderr, done.stderr[-2000:]
    assert gradebook.read_text() == "file,x\nalice.ipynb,1\n"


def test_a_late_submission_meets_the_class_and_a_broken_one_is_graded_by_hand(built, tmp_path):
    """A late notebook graded alone is compared with the answers of the class graded before (the
    reviewer's late eve, word for word ana's, got full completion marks unflagged); a notebook otter
    cannot run (it loops, or is not JSON) is graded by hand with ``--by-hand``: not run, its row the
    grader's, every column included, its feedback written from that row, exit status 0."""
    import csv

    name = "ps1_measures"
    questions = problem_sets.questions(name)
    subs = tmp_path / "set1"
    subs.mkdir()
    blank = json.loads((built / name / "student" / f"{name}.ipynb").read_text())
    answer = next(c for c in blank["cells"] if "otter_answer_cell" in c["metadata"].get("tags", []))
    answer["source"] = (
        "My own derivation: the moment generating function is finite below the rate, and the "
        "derivative of its logarithm gives the mean of the tilted law, which is the limit."
    )
    (subs / "ana.ipynb").write_text(json.dumps(blank))
    out = run_grade_all(built, name, subs, tmp_path, "--completion")
    # the grader's own file of the failed hidden checks, with their messages
    hidden = (out / f"hidden-checks-{name}.md").read_text()
    assert "for the grader only" in hidden and "## ana.ipynb" in hidden, hidden
    auto = [q["name"] for q in questions if not q["manual"]]
    assert any(f"- {q}: " in hidden for q in auto) and "failed: " in hidden, hidden
    shutil.copyfile(subs / "ana.ipynb", subs / "eve.ipynb")  # late, and ana's word for word
    done = run_grade_all(built, name, subs / "eve.ipynb", tmp_path, "--completion", check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "compared with 1 other submission(s)" in done.stderr, done.stderr[-2000:]
    flagged = [
        line
        for line in done.stderr.splitlines()
        if line.startswith("grade_all: eve.ipynb: near-copies")
    ]
    assert flagged and "ana.ipynb's answer (1.00)" in flagged[0], done.stderr[-2000:]
    gradebook = out / f"grades-{name}.csv"
    first = next(q["name"] for q in questions if q["manual"])
    eve = {r["file"]: r for r in csv.DictReader(gradebook.open())}["eve.ipynb"]
    assert eve[first] == "", eve  # a near-copy is left for the grader, not marked unread
    # from another folder too: the record of the class's notebooks finds ana
    late = tmp_path / "late"
    late.mkdir()
    shutil.copyfile(subs / "ana.ipynb", late / "fay.ipynb")
    done = run_grade_all(built, name, late, tmp_path, "--collate", "--no-rerun", check=False)
    assert (
        "grade_all: fay.ipynb: near-copies" in done.stderr and "ana.ipynb's answer" in done.stderr
    )
    # a notebook that is not JSON, graded by hand
    (subs / "di.ipynb").write_text("{not a notebook")
    done = run_grade_all(
        built, name, subs / "di.ipynb", tmp_path, "--by-hand", "di.ipynb", check=False
    )
    assert done.returncode == 0 and "NOT GRADED" not in done.stderr, done.stderr[-2000:]
    assert "di.ipynb: graded by hand (--by-hand): enter its marks" in done.stdout, done.stdout
    di = {r["file"]: r for r in csv.DictReader(gradebook.open())}["di.ipynb"]
    assert all(di[q["name"]] == "" for q in questions) and di["total_awarded"] == "", di
    feedback = (out / "feedback" / name / "di.md").read_text()
    assert "could not be run by the autograder" in feedback and "not marked yet" in feedback
    # the grader marks every question, the autograded ones by their rubric; --reuse keeps the row
    rows = list(csv.DictReader(gradebook.open()))
    for row in rows:
        if row["file"] == "di.ipynb":
            row.update({q["name"]: f"{q['points'] / 2:g}" for q in questions})
    with gradebook.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    done = run_grade_all(
        built, name, subs, tmp_path, "--reuse", "--by-hand", "di.ipynb", check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    total, _ = problem_sets.points(name)
    di = {r["file"]: r for r in csv.DictReader(gradebook.open())}["di.ipynb"]
    assert float(di["total_awarded"]) == total / 2, di
    feedback = (out / "feedback" / name / "di.md").read_text()
    assert (
        f"Total: {total / 2:g} of {total:g} points." in feedback
        and "not marked yet" not in feedback
    )
    # later runs remember it: without --by-hand it is still graded by hand
    done = run_grade_all(built, name, subs / "di.ipynb", tmp_path, check=False)
    assert done.returncode == 0 and "NOT GRADED" not in done.stderr, done.stderr[-2000:]
    assert "as an earlier run's --by-hand recorded in" in done.stderr, done.stderr[-2000:]
    # its name deleted from the record, otter tries it again and names it; a --by-hand name that is
    # not given is refused
    record = out / f"by-hand-{name}.json"
    assert json.loads(record.read_text()) == ["di.ipynb"]
    record.write_text("[]\n")
    done = run_grade_all(built, name, subs / "di.ipynb", tmp_path, check=False)
    assert done.returncode == 1 and "di.ipynb: NOT GRADED" in done.stderr
    done = run_grade_all(
        built, name, subs / "ana.ipynb", tmp_path, "--by-hand", "bo.ipynb", check=False
    )
    assert done.returncode != 0 and "--by-hand got ['bo.ipynb']" in done.stderr, done.stderr[-500:]


def run_grade_all(
    built: Path, name: str, subs: Path, tmp_path: Path, *options: str, check: bool = True
):
    """Run the built folder's grade_all.py on the notebooks of ``subs``, as a lecturer without the
    repository would; the folder it writes (gradebook and feedback), or with ``check=False`` the
    finished process."""
    import subprocess
    import sys

    out = tmp_path / "graded"
    done = subprocess.run(
        [sys.executable, str(built / "grade_all.py"), name, str(subs), "--out", str(out), *options],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    if not check:
        return done
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def _autograder_cases(built: Path, name: str) -> dict[str, dict]:
    """The test cases of set ``name``'s autograder.zip, by otter's case name ("q2 - 6"): each case's
    ``hidden`` flag and ``failure_message``, read from the zip's tests/qN.py (the autograder's own)."""
    import ast

    cases = {}
    with zipfile.ZipFile(built / name / "autograder" / "autograder.zip") as z:
        for file in z.namelist():
            if not re.fullmatch(r"tests/\w+\.py", file):
                continue
            tree = ast.parse(z.read(file).decode())
            test = next(
                ast.literal_eval(node.value)
                for node in tree.body
                if isinstance(node, ast.Assign) and node.targets[0].id == "test"
            )
            flat = [case for suite in test["suites"] for case in suite["cases"]]
            for k, case in enumerate(flat, 1):
                cases[f"{test['name']} - {k}"] = case
    return cases


def _hidden_messages(built: Path, name: str) -> list[str]:
    cases = _autograder_cases(built, name).values()
    found = [str(c.get("failure_message") or "").strip() for c in cases if c.get("hidden")]
    assert found and all(found), (name, found)
    return found


@pytest.mark.book
def test_grade_all_feedback_counts_the_hidden_checks_and_quotes_none(built, tmp_path):
    """A submission that fails hidden checks (set 2: the Gaussian constant for Gamma tokens in question
    1, the centred queries' constant in question 2): its feedback quotes the failed public checks'
    messages (the student's notebook holds them) and none of the hidden checks' messages (taken from the
    autograder's tests), and states how many hidden checks failed per question (counted again from
    otter's results.json with the autograder's hidden flags)."""

    name = "ps2_concentration"
    subs = tmp_path / "subs"
    subs.mkdir()
    nb = json.loads((built / name / "autograder" / f"{name}.ipynb").read_text())
    for label in (
        "ps2 Gaussian constant for Exp(1) tokens",
        "ps2 the centred queries' constant, no mean",
    ):
        _, _, starts, source = WRONG[label]
        hits = [c for c in nb["cells"] if "".join(c["source"]).startswith(starts)]
        assert len(hits) == 1, label
        hits[0]["source"] = source
    (subs / "wrong.ipynb").write_text(json.dumps(nb))
    out = run_grade_all(built, name, subs, tmp_path)
    text = (out / "feedback" / name / "wrong.md").read_text()
    cases = _autograder_cases(built, name)
    for message in _hidden_messages(built, name):
        assert message not in text, message
    results = json.loads((out / "results" / name / "wrong" / "results.json").read_text())
    failed = {}  # question: (public failed cases, hidden failed cases), by the autograder's flags
    for entry in results["tests"]:
        if entry.get("max_score") is None:
            continue
        lines = entry["output"].splitlines()
        for k, line in enumerate(lines[:-1]):
            m = re.match(r"^\s*(\w+ - \d+) result:\s*$", line)
            if m and "failed" in lines[k + 1]:
                pub, hid = failed.setdefault(entry["name"], ([], []))
                (hid if cases[m[1]].get("hidden") else pub).append(m[1])
    assert failed["q1"][1] and failed["q2"][1], failed  # hidden checks fail on both questions
    rows = {r.split("|")[1].strip(): r for r in text.splitlines() if re.match(r"^\| q\d", r)}
    for q, (pub, hid) in failed.items():
        cells = [c.strip() for c in rows[q].strip().strip("|").split("|")]
        assert cells[2:] == [str(len(pub)), str(len(hid))], (q, cells, pub, hid)
        n = len(hid)
        assert f"{n} hidden check{'' if n == 1 else 's'} failed." in text, (q, n, text)
        for case in pub:  # the failed public checks' messages are quoted: the notebook shows them
            assert f"- {cases[case]['failure_message'].strip()}" in text, case
    # the hidden checks' inputs do not leak by another route either: none of their code's numbers
    for case in cases.values():
        if case.get("hidden"):
            for line in case["code"].splitlines():
                if len(line.strip()) > 30:
                    assert line.strip().lstrip(">. ") not in text, line


def test_feedback_keeps_only_the_public_checks_messages():
    """grade_all.feedback on otter's results: a failed case is public when the "Public Tests" entry lists
    it as failed (its message comes from there); any other failed case is hidden and only counted,
    also when every public check passed; without a "Public Tests" entry, every failure is hidden."""
    feedback = problem_sets.grade_all_module().feedback

    def case(q, k, failed, message=None):
        head = f"    {q} - {k} message: {message}\n\n" if message else ""
        result = "❌ Test case failed" if failed else "✅ Test case passed"
        return f"{head}    {q} - {k} result:\n        {result}\n        Trying:\n            x = 3.14159\n"

    public = {
        "name": "Public Tests",
        "visibility": "visible",
        "output": "q1 results:\n"
        + case("q1", 1, True, "public one")
        + case("q1", 2, False)
        + "\nq2 results: All test cases passed!",
    }
    q1 = {
        "name": "q1",
        "score": 0.5,
        "max_score": 1.5,
        "visibility": "hidden",
        "output": "q1 results:\n"
        + case("q1", 1, True, "public one")
        + case("q1", 2, False)
        + case("q1", 3, True, "hidden: C is about 3.8074826329")
        + case("q1", 4, True),
    }
    q2 = {
        "name": "q2",
        "score": 0,
        "max_score": 1,
        "visibility": "hidden",
        "output": "q2 results:\n" + case("q2", 1, False) + case("q2", 2, True, "hidden: 5/(27λ²)"),
    }
    points, public_failed, hidden_failed = feedback({"tests": [public, q1, q2]})
    assert points == {"q1": (0.5, 1.5), "q2": (0.0, 1.0)}
    assert public_failed == {"q1": ["public one"]}
    assert hidden_failed == {"q1": 2, "q2": 1}
    points, public_failed, hidden_failed = feedback({"tests": [q1, q2]})
    assert public_failed == {} and hidden_failed == {"q1": 3, "q2": 1}


def test_reused_results_of_another_set_are_refused(tmp_path):
    """grade_all --reuse reads otter's kept results: those of another set (other questions or points)
    or a score above its points stop the run with the file named, so that one set's points never
    enter another set's gradebook. (The grading tests on the built sets read each set's results and
    feedback from its own folder, OUT/results/NAME/ and OUT/feedback/NAME/.)"""
    grade_all = problem_sets.grade_all_module()
    questions = problem_sets.questions("ps1_measures")
    auto = [q for q in questions if not q["manual"]]

    def results(scores):
        return {
            "tests": [
                {"name": q, "score": p, "max_score": m, "output": ""}
                for q, (p, m) in scores.items()
            ]
        }

    own = {q["name"]: (float(q["points"]), float(q["points"])) for q in auto}
    grade_all.check_results(results(own), questions, "ps1_measures", tmp_path)  # accepted
    other = {"q1": (1.5, 1.5), "q2": (1.5, 1.5), "q3": (1.5, 1.5)}  # set 2's autograded points
    with pytest.raises(SystemExit, match="other questions"):
        grade_all.check_results(results(other), questions, "ps1_measures", tmp_path)
    over = {**own, auto[0]["name"]: (9.0, float(auto[0]["points"]))}
    with pytest.raises(SystemExit, match="more than the points possible"):
        grade_all.check_results(results(over), questions, "ps1_measures", tmp_path)


@pytest.mark.parametrize("script", ["grade_all.py", "rehearse.py"])
def test_a_python_without_the_grader_stops_with_what_to_install(script, tmp_path):
    """Run with a Python that cannot import otter (here: ours without its site-packages, ``-S``),
    grade_all.py and rehearse.py stop at once, exit 1, with no traceback, naming every package
    missing and the install line of README.md's step 1, before any submission runs or any folder
    is written."""
    done = subprocess.run(
        [
            sys.executable,
            "-S",
            str(ROOT / "course" / script),
            *(
                ["ps1_measures", str(tmp_path)]
                if script == "grade_all.py"
                else ["--out", str(tmp_path / "rehearsal")]
            ),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    message = done.stderr
    assert done.returncode == 1, f"{script} exited {done.returncode}: {message}"
    assert "Traceback" not in message, f"{script} printed a traceback:\n{message}"
    for name in ("otter", "softlin", "torch", "scipy"):
        assert "cannot import" in message and name in message, f"{name} not named:\n{message}"
    assert "pip install otter-grader==7.0.0" in message and "README.md, step 1" in message, message
    assert not (tmp_path / "rehearsal").exists(), f"{script} wrote a folder before stopping"


def test_feedback_names_the_errors_the_students_code_raised(tmp_path):
    """grade_all.raised: the error that ends a failed case's traceback (not an AssertionError, which is
    a check failing) is named per question, whole for a public check, by its type alone for a hidden
    one unless it is a NameError; the feedback file lists them, with a hint for a NameError."""
    grade_all = problem_sets.grade_all_module()

    def case(q, k, error):
        return (
            f"    {q} - {k} result:\n        ❌ Test case failed\n        Exception raised:\n"
            "            Traceback (most recent call last):\n"
            f'              File "<doctest {q} 0[0]>", line 1, in <module>\n'
            f"            {error}\n"
        )

    public = {
        "name": "Public Tests",
        "output": "q1 results:\n" + case("q1", 1, "NameError: name 'f' is not defined"),
    }
    q1 = {
        "name": "q1",
        "score": 0,
        "max_score": 1,
        "output": "q1 results:\n"
        + case("q1", 1, "NameError: name 'f' is not defined")
        + case("q1", 2, "ValueError: x = 3.8074826329 is out of range")
        + case("q1", 3, "AssertionError: expected 3.8074826329"),
    }
    q2 = {"name": "q2", "score": 1, "max_score": 1, "output": "q2 results: All passed!"}
    assert grade_all.raised({"tests": [public, q1, q2]}) == {
        "q1": ["NameError: name 'f' is not defined", "ValueError (in a hidden check)"]
    }
    path = tmp_path / "f.md"
    grade_all.write_feedback(
        path,
        "ps1_measures",
        "f.ipynb",
        {"q1": (0.0, 1.0)},
        {"q1": ["public one"]},
        {"q1": 2},
        errors=grade_all.raised({"tests": [public, q1, q2]}),
        comments="Good start; see the rubric on q1a.",
    )
    text = path.read_text()
    assert "- `NameError: name 'f' is not defined`" in text, text
    assert "- `ValueError (in a hidden check)`" in text and "a cell above stopped" in text, text
    assert "3.807" not in text, text  # nothing of a hidden check's values
    assert "Comments: Good start; see the rubric on q1a." in text, text
    with pytest.raises(ValueError, match=r"timeout: got 0 seconds, expected a positive"):
        grade_all.run_otter(tmp_path / "a.zip", tmp_path / "f.ipynb", tmp_path / "r", timeout=0)


def test_feedback_says_not_answered_for_an_answer_left_blank(tmp_path):
    """An autograded answer still as the blank set has it (``...``, a ``def`` with only its docstring
    and ``...``) is named "not answered" in the feedback, not by the TypeError its None raises in
    the checks; one line of work makes it an answer, whose errors are quoted as before."""
    grade_all = problem_sets.grade_all_module()

    def code(text):
        return {"cell_type": "code", "source": text, "metadata": {}}

    blank_def = 'def f(a):\n    """The output."""\n    ...'
    nb = {
        "cells": [
            {"cell_type": "markdown", "source": "**Question 1 (1 point)**", "metadata": {}},
            code(blank_def),
            code('grader.check("q1")'),
            {"cell_type": "markdown", "source": "**Question 2 (1 point)**", "metadata": {}},
            code("x = ...\nx"),
            code('grader.check("q2")'),
            {"cell_type": "markdown", "source": "**Question 3 (1 point)**", "metadata": {}},
            code(blank_def.replace("...", "return 2 * a")),
            code("grader.check('q3')"),
            code("y = 1 +"),  # does not parse: typed, so an answer
            code('grader.check("q4")'),
        ]
    }
    assert grade_all.unanswered_autograded(nb) == {"q1", "q2"}
    path = tmp_path / "f.md"
    grade_all.write_feedback(
        path,
        "ps1_measures",
        "f.ipynb",
        {"q1": (0.0, 1.0), "q3": (0.0, 1.0)},
        {"q1": ["public one"], "q3": ["public three"]},
        {"q1": 2, "q3": 1},
        errors={"q1": ["TypeError: 'NoneType' object"], "q3": ["ValueError: bad"]},
        unanswered=grade_all.unanswered_autograded(nb),
    )
    text = path.read_text()
    assert "**q1** (0 of 1 point): not answered" in text, text
    assert "NoneType" not in text and "public one" not in text, text
    assert "- `ValueError: bad`" in text and "- public three" in text, text


def test_collated_answers_show_the_figures_drawn_and_the_errors_raised(tmp_path):
    """grade_all.write_collated writes each figure of a hand-graded answer beside the collated file,
    linked in place, and names an error a cell raised: the grader marks the report's computation
    from that file without opening every notebook."""
    import base64

    grade_all = problem_sets.grade_all_module()
    png = base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    )
    cells = [
        nbformat.v4.new_markdown_cell("<!-- BEGIN QUESTION -->\n\n**Question 5 (6 points)**"),
        nbformat.v4.new_code_cell(
            "plot()",
            outputs=[
                nbformat.v4.new_output(
                    "display_data", data={"image/png": base64.b64encode(png).decode()}
                ),
                nbformat.v4.new_output("error", ename="ValueError", evalue="L must be > 1"),
            ],
        ),
        nbformat.v4.new_markdown_cell("<!-- END QUESTION -->"),
    ]
    notebook = tmp_path / "alice.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=cells), notebook)
    questions = [{"name": "q5", "points": 6, "manual": True}]
    (path,) = grade_all.write_collated(tmp_path / "graded", "ps3_regression", questions, [notebook])
    text = path.read_text()
    assert "![a figure](ps3_regression-q5-figures/alice-1.png)" in text, text
    assert (path.parent / "ps3_regression-q5-figures" / "alice-1.png").read_bytes() == png
    assert "This cell raised ValueError: L must be > 1" in text, text


def _cells(notebook: Path) -> list[tuple[str, str, str]]:
    """A notebook's cells as (type, source, metadata), without the ids otter draws at each build."""
    nb = json.loads(notebook.read_text())
    return [
        (c["cell_type"], "".join(c["source"]), json.dumps(c.get("metadata"), sort_keys=True))
        for c in nb["cells"]
    ]


def test_the_kit_draws_set_variants_without_the_repository(built, tmp_path):
    """The built kit ships its generator (``variants/``: this module, the sources, the written check's
    generator, the bank, grade_all.py, the commit built from); run from a copy of the kit with only
    the library importable (no tools/, no course/), it writes a seed's sets into ``variant-SEED/``, the
    same notebooks as the repository's ``--variant SEED`` build, and the README says how."""
    from conftest import run_with_library_only

    shipped = built / "variants"
    assert (shipped / "problem_sets.py").read_bytes() == Path(problem_sets.__file__).read_bytes()
    assert sorted(p.name for p in (shipped / "sources").glob("*.md")) == [
        f"{name}.md" for name in problem_sets.sets()
    ]
    assert (shipped / "BUILT_FROM").read_text().strip() == (problem_sets.built_from() or "")
    readme = (built / "README.md").read_text()
    assert "`python variants/problem_sets.py --variant SEED`" in readme
    kit = tmp_path / "kit"
    shutil.copytree(shipped, kit / "variants")
    for wheel in built.glob("softlin-*.whl"):
        shutil.copyfile(wheel, kit / wheel.name)
    # its --help gives the kit's commands, with no seed to copy, not the repository's
    shown = run_with_library_only("variants/problem_sets.py", "--help", cwd=kit)
    assert shown.returncode == 0, (shown.stdout + shown.stderr)[-3000:]
    assert "python variants/problem_sets.py --variant SEED" in shown.stdout, shown.stdout
    for repo_only in ("tools/", "_build/", str(VARIANT)):
        assert repo_only not in shown.stdout, f"{repo_only!r} in the kit's --help:\n{shown.stdout}"
    name = "ps1_measures"
    done = run_with_library_only(
        "variants/problem_sets.py", name, "--variant", str(VARIANT), cwd=kit
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    out = kit / f"variant-{VARIANT}"
    repo = problem_sets.build(name, tmp_path / "repo", variant=VARIANT, run_tests=False)
    for kind in ("student", "autograder"):
        assert _cells(out / name / kind / f"{name}.ipynb") == _cells(
            repo / kind / f"{name}.ipynb"
        ), kind
    assert (out / name / "rubric.md").read_text() == problem_sets.rubric(name, VARIANT)
    assert (out / "written-check-key.md").exists() and (out / "grade_all.py").exists()
    assert (out / "final_grades.py").exists()
    assert f"variant {VARIANT}" in (out / "README.md").read_text()


def test_a_variant_has_other_numbers_and_its_solution_gets_full_marks(built, tmp_path_factory):
    out = tmp_path_factory.mktemp("problem-sets-variant")
    assert problem_sets.main(["--variant", str(VARIANT), "--out", str(out)]) == 0
    assert f"variant {VARIANT}" in (out / "README.md").read_text()
    # its written check: other numbers than the default's, said so in its README
    assert "every number of its key differs" in (out / "README.md").read_text()
    assert (out / "written-check-key.md").read_text() != (
        built / "written-check-key.md"
    ).read_text()
    for name in SETS:
        student = (out / name / "student" / f"{name}.ipynb").read_text()
        title = json.loads(student)["cells"][0]["source"][0]
        assert "(variant)" in title and str(VARIANT) not in title, (name, title)
        assert "hidden: true" not in student, name
        solution = problem_sets.grade(
            name, out / name / "autograder" / f"{name}.ipynb", out, VARIANT
        )
        assert solution["auto"][0] == solution["auto"][1] > 0, (name, solution)
    # An expected value differs: set 1's question 3, by more than its hidden test's tolerance (5e-3) ...
    default, variant = problem_sets.parameters(), problem_sets.parameters(VARIANT)
    assert abs(_tilted_mean(variant["ps1_measures"]) - _tilted_mean(default["ps1_measures"])) > 5e-3
    # ... so the default solution, graded by the variant's autograder, loses that question, and
    # question 2 (the tokens' rate changed), while the questions that take no number keep theirs.
    stale = problem_sets.grade(
        "ps1_measures", built / "ps1_measures" / "autograder" / "ps1_measures.ipynb", out, VARIANT
    )["questions"]
    assert stale["q3"][0] < stale["q3"][1] and stale["q2"][0] < stale["q2"][1], stale
    assert stale["q1"][0] == stale["q1"][1], stale
    # set 2's questions 1 and 3 take set 1's law: the default closed form and draws lose them
    stale = problem_sets.grade(
        "ps2_concentration",
        built / "ps2_concentration" / "autograder" / "ps2_concentration.ipynb",
        out,
        VARIANT,
    )["questions"]
    assert stale["q1"][0] < stale["q1"][1] and stale["q3"][0] < stale["q3"][1], stale
    assert stale["q2"][0] == stale["q2"][1], stale


# Colab, as far as it can be simulated here: what the kernel sees there is (1) ``google.colab`` among
# the modules and a shell whose class lives in ``google.colab._shell`` (otter-grader tells Colab by
# ``str(get_ipython())``), and (2) a working directory that holds neither the notebook nor a tests/
# folder (Colab keeps the notebook in Drive). The first cell below fakes (1); the run fakes (2).
FAKE_COLAB = """\
import sys, types
sys.modules.setdefault("google", types.ModuleType("google"))
sys.modules["google.colab"] = types.ModuleType("google.colab")
_shell = get_ipython()
_shell.__class__ = type("Shell", (type(_shell),), {"__module__": "google.colab._shell"})
assert "google.colab" in str(get_ipython())
"""


@pytest.mark.book
@pytest.mark.parametrize("where", ["colab", "renamed"])
@pytest.mark.parametrize("name", SETS)
def test_the_student_versions_check_answers_under_colab(built, tmp_path, name, where):
    """A student version, run as Colab runs it (``google.colab`` present, otter-grader in its Colab
    mode, no notebook file and no tests/ folder in the working directory), or saved under another name
    in a plain kernel (``smith.ipynb``: otter cannot find the notebook it names), loads its public
    checks from its setup cell and runs them: a question answered with the solution's functions passes
    its public checks, the others fail them (they do not raise), and ``grader.check_all()`` runs."""
    import nbformat
    import papermill
    from build_book import LocalKernelManager

    student = nbformat.read(built / name / "student" / f"{name}.ipynb", as_version=4)
    solution = nbformat.read(built / name / "autograder" / f"{name}.ipynb", as_version=4)
    answers = {
        c.source.splitlines()[0]: c.source
        for c in solution.cells
        if c.cell_type == "code" and c.source.startswith("def ")
    }
    blanks = [
        c
        for c in student.cells
        if c.cell_type == "code" and c.source[:200].split("\n")[0] in answers
    ]
    assert len(blanks) >= 2, name
    for cell in blanks[:-1]:  # all but the last, which stays blank: its check must fail, not raise
        cell.source = answers[cell.source.splitlines()[0]]
    filled = len(blanks) - 1
    if where == "colab":
        student.cells.insert(0, nbformat.v4.new_code_cell(FAKE_COLAB))
        source, cwd = tmp_path / "in" / f"{name}.ipynb", tmp_path / "content"
    else:
        cwd = tmp_path / "content"
        source = cwd / "smith.ipynb"
    source.parent.mkdir(exist_ok=True)
    cwd.mkdir(exist_ok=True)
    nbformat.write(student, source)
    ran = papermill.execute_notebook(
        str(source),
        str(tmp_path / "out.ipynb"),
        cwd=str(cwd),
        kernel_name="python3",
        kernel_manager_class=LocalKernelManager,
        progress_bar=False,
        execution_timeout=600,
    )
    public = sorted(student.metadata["otter"]["tests"])
    folder = cwd / problem_sets.colab_folder(name)
    assert sorted(p.stem for p in folder.glob("*.py")) == public, name
    assert not (cwd / f"{name}.ipynb").exists() and not (cwd / "tests").exists(), name

    def text(cell):
        return "".join(
            o.get("text", "") + json.dumps(o.get("data", {})) for o in cell.get("outputs", [])
        )

    checks = {}
    for cell in ran.cells:
        m = re.fullmatch(r'grader\.check\("(\w+)"\)', cell.source.strip())
        if m:
            checks[m[1]] = text(cell)
    assert sorted(checks) == public, (name, sorted(checks))
    for (
        q,
        out,
    ) in checks.items():  # a check that could not load its tests raises, and papermill with it
        assert re.search(rf"\b{q} (results:|passed)", out), (name, q, out[:500])
    passed = {
        q
        for q, out in checks.items()
        if re.search(rf"\b{q} (passed|results: All test cases passed)", out)
    }
    print(name, "passed:", sorted(passed), "of", public, "with", filled, "functions filled in")
    assert len(passed) == filled and passed != set(public), (name, checks)


# The slips a lecturer tried, each of which passed every public check of its question before these
# checks were added (review round 11): each must now fail at least one public check.
SLIPS = {
    ("ps1_measures", "q1"): (  # the fourth cumulant without its -3 sigma^4
        "def tilt_coefficients(x, p):\n"
        "    c = x - p @ x\n"
        "    return float(p @ c**3 / 2), float(p @ c**4 / 6)\n"
    ),
    ("ps1_measures", "q2"): "def tilted_limit(a):\n    return 1 / (2.0 - a)\n",  # no domain
    (
        "ps2_concentration",
        "q1",
    ): (  # the domain of T(a), a < lambda, not that of C_1, a < lambda / 2
        "def tilted_constant(a):\n"
        "    lam = 2.0\n"
        "    if a >= lam:\n"
        "        return math.inf\n"
        "    return (lam * lam - 2 * a * lam + 2 * a * a) / (lam * abs(lam - 2 * a) ** 3)\n"
    ),
    ("ps1_measures", "q2 mgf"): (  # the moment generating function, not the tilted mean
        "def tilted_limit(a):\n    return 2.0 / (2.0 - a) if a < 2.0 else math.inf\n"
    ),
    ("ps2_concentration", "q2"): (  # the query mean left out (the centred queries' constant)
        "def averaged_constant(U, V, Gamma, m_q):\n"
        "    M = U.T @ Gamma @ U\n"
        "    K = torch.eye(Gamma.shape[0]) - 2 * M\n"
        "    if float(torch.linalg.eigvalsh(K).min()) <= 0:\n"
        "        return math.inf\n"
        "    S = torch.linalg.inv(K)\n"
        "    B = U.T @ Gamma @ V.T @ V @ Gamma @ U\n"
        "    return float(torch.det(K) ** -0.5 * (torch.trace(V @ Gamma @ V.T) + torch.trace(B @ S)))\n"
    ),
    ("ps1_measures", "q3"): "two_point_limit = 0.3 * -1.0 + 0.7 * 2.0\n",  # the plain mean, no tilt
    ("ps1_measures", "q3 sign"): (  # the weights tilted the wrong way, e^{-a x}
        "import math\n"
        "_w1, _w2 = 0.3 * math.exp(-0.5 * -1.0), 0.7 * math.exp(-0.5 * 2.0)\n"
        "two_point_limit = (_w1 * -1.0 + _w2 * 2.0) / (_w1 + _w2)\n"
    ),
    ("ps1_measures", "q3 affine"): (  # the Gaussian formula m + Var a for a two-point law
        "two_point_limit = 1.1 + 0.5 * (0.3 * 1.0 + 0.7 * 4.0 - 1.1**2)\n"
    ),
    ("ps1_measures", "q2 edge"): (  # the domain a > lambda, not a >= lambda
        "def tilted_limit(a):\n    return 1 / (2.0 - a) if a <= 2.0 else math.inf\n"
    ),
    ("ps2_concentration", "q2 gamma"): (  # the exponent matrix U^T U, Gamma left out
        "def averaged_constant(U, V, Gamma, m_q):\n"
        "    D = Gamma.shape[0]\n"
        "    K = torch.eye(D) - 2 * U.T @ U\n"
        "    if float(torch.linalg.eigvalsh(K).min()) <= 0:\n"
        "        return math.inf\n"
        "    S = torch.linalg.inv(K)\n"
        "    m = S @ m_q\n"
        "    B = U.T @ Gamma @ V.T @ V @ Gamma @ U\n"
        "    Z = torch.linalg.det(K) ** -0.5 * torch.exp(0.5 * m_q @ (S - torch.eye(D)) @ m_q)\n"
        "    return float(Z * (torch.trace(V @ Gamma @ V.T) + torch.trace(B @ S) + m @ B @ m))\n"
    ),
    ("ps2_concentration", "q3 centred"): (  # centred on the prompts' own mean, not on T(a)
        "def simulate_constant(n, seed):\n"
        "    g = torch.Generator().manual_seed(seed)\n"
        "    tokens = torch.empty(n, 1000, 1).exponential_(2.0, generator=g)\n"
        "    out = sl.softmax_attention(tokens, torch.ones(n, 1, 1), 0.4 * torch.eye(1), torch.eye(1))[:, 0, 0]\n"
        "    sq = 1000 * (out - out.mean()) ** 2\n"
        "    return float(sq.mean()), float(sq.std() / math.sqrt(n))\n"
    ),
    ("ps2_concentration", "q3 draws"): (  # the right statistic, prompts drawn by inverse CDF
        "def simulate_constant(n, seed):\n"
        "    g = torch.Generator().manual_seed(seed)\n"
        "    tokens = -torch.log(torch.rand(n, 1000, 1, generator=g)) / 2.0\n"
        "    out = sl.softmax_attention(tokens, torch.ones(n, 1, 1), 0.4 * torch.eye(1), torch.eye(1))[:, 0, 0]\n"
        "    sq = 1000 * (out - 1 / (2.0 - 0.4)) ** 2\n"
        "    return float(sq.mean()), float(sq.std() / math.sqrt(n))\n"
    ),
    ("ps2_concentration", "q1 edge"): (  # the domain a > lambda / 2, not a >= lambda / 2
        "def tilted_constant(a):\n"
        "    lam = 2.0\n"
        "    if a > lam / 2:\n"
        "        return math.inf\n"
        "    return (lam * lam - 2 * a * lam + 2 * a * a) / (lam * (lam - 2 * a) ** 3)\n"
    ),
    ("ps3_regression", "q1 edge"): (  # c > 1/2 for c >= 1/2: the edge c = 1/2 divides by zero
        "def ratio_at_optimum(Sigma):\n"
        "    d = Sigma.shape[0]\n"
        "    Si = torch.linalg.inv(Sigma)\n"
        "    c = float(torch.trace(Si @ Si)) ** -0.5\n"
        "    if c > 0.5:\n"
        "        return math.inf\n"
        "    return (1 - c) / (c * (1 - 2 * c) ** (d / 2 + 1) * (d + 1))\n"
    ),
    ("ps3_regression", "q1"): "def ratio_at_optimum(Sigma):\n    return 6.19\n",  # a typed constant
    ("ps3_regression", "q2"): (  # a wrong tilt, with the right ratio formula
        "def best_c(d):\n    return 1 / (d + 2)\n"
        "def best_ratio(d):\n"
        "    c = best_c(d)\n"
        "    return (1 - c) / (c * (1 - 2 * c) ** (d / 2 + 1) * (d + 1))\n"
    ),
    ("ps3_regression", "q2 exponent"): (  # the right tilt, and d / 2 for d / 2 + 1 in the ratio
        "def best_c(d):\n    return ((d + 4) - math.sqrt(d * d + 4 * d + 8)) / (2 * (d + 2))\n"
        "def best_ratio(d):\n"
        "    c = best_c(d)\n"
        "    return (1 - c) / (c * (1 - 2 * c) ** (d / 2) * (d + 1))\n"
    ),
}


@pytest.mark.parametrize("name,q", sorted(SLIPS))
def test_a_common_slip_fails_a_public_check(name, q):
    """The student's own run of the public checks catches the slips a grader sees most, so that
    "All test cases passed!" is not printed for them; the model solution passes the same checks."""
    import math

    import softlin as sl
    import torch
    from softlin import icl

    _, public = _questions_code(problem_sets.source(name))[q.split()[0]]
    assert public, (name, q)
    base = {"math": math, "torch": torch, "sl": sl, "icl": icl, "Sigma": icl.kms_covariance(5, 0.5)}
    with torch_default_float64():
        failed = []
        for check in public:
            scope = dict(base)
            exec(SLIPS[name, q], scope)
            try:
                exec(check, scope)
            except (AssertionError, ArithmeticError):  # otter fails a check that raises, too
                failed.append(check.split("failure_message:")[1].split("\n")[0].strip())
    assert failed, f"{name} {q}: the slip passes every public check"
    print(name, q, "caught by:", failed)


class torch_default_float64:
    """The problem sets' setup cell sets float64 as torch's default dtype."""

    def __enter__(self):
        import torch

        self.old = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)

    def __exit__(self, *exc):
        import torch

        torch.set_default_dtype(self.old)


def test_students_can_type_their_answers_in_jupyter(tmp_path):
    """otter assign locks the cells of a question block ("editable": false), which Jupyter enforces: the
    student versions must leave every cell editable (the answer cells among them)."""
    import nbformat

    for name in SETS:
        result = problem_sets.build(name, tmp_path, run_tests=False)
        nb = nbformat.read(result / "student" / f"{name}.ipynb", as_version=4)
        locked = [c.source[:60] for c in nb.cells if c.metadata.get("editable") is False]
        assert not locked, (name, locked)
        answers = [c for c in nb.cells if c.cell_type == "code" and "..." in c.source]
        assert answers, name  # the answer cells are there, with otter's "..." to replace


def test_set_2_s_public_reference_value_is_the_quadrature_s():
    """Set 2 question 2's public check for correlated tokens states C as a number (the quadrature that
    computes it would hand the hidden points to whoever copies it): here it is recomputed, by
    Gauss-Hermite quadrature over the queries, independently of the model solution's closed form."""
    import softlin as sl
    import torch

    with torch_default_float64():
        G = torch.tensor([[1.0, 0.3], [0.3, 0.5]])
        U = torch.tensor([[0.3, 0.2], [-0.1, 0.4]])
        V = torch.tensor([[1.0, -0.5], [0.2, 0.7], [0.0, 1.0]])
        z, w = sl.gauss_hermite_rule(torch.tensor([0.5, -1.0]), torch.eye(2), 60)
        a = z @ U.T
        f = torch.exp(((a @ G) * a).sum(-1)) * (
            torch.trace(V @ G @ V.T) + ((a @ G @ V.T) ** 2).sum(-1)
        )
        stated = re.search(r"_mq\) - ([\d.]+)\) < 1e-8", problem_sets.source("ps2_concentration"))
        assert stated, "set 2's public check of a correlated Gamma was not found"
        assert abs(float(stated.group(1)) - float(w @ f)) < 1e-12 * float(w @ f), (
            stated.group(1),
            float(w @ f),
        )


def test_the_oral_check_bank_is_built_beside_the_rubrics_and_not_on_the_site(built):
    """Nine questions, three per set, each with its follow-up and both answers; built into the sets'
    folder (`oral-checks.md`) and named in its README; the book's pages do not print it; its numbers are
    the lessons' (computed again here)."""
    import softlin.icl as icl

    bank = (built / "oral-checks.md").read_text()
    assert "oral-checks.md" in (built / "README.md").read_text()
    # and the written check built from it (tests/test_kit_written_check.py checks its contents)
    for file in ("written-check.md", "written-check.html", "written-check-key.md"):
        assert (built / file).exists(), file
        assert file in (built / "README.md").read_text(), file
    assert "VARIANT=SEED" in (built / "README.md").read_text()  # the default key is public
    # ... and its generator, for a private seed without the repository (test_kit_written_check.py runs it)
    shipped = (ROOT / "tools" / "written_check.py").read_bytes()
    assert (built / "written_check.py").read_bytes() == shipped
    readme = (built / "README.md").read_text()
    assert "`python written_check.py --seed SEED` in this folder" in readme
    assert "pick a private seed (eight digits" in readme and "never hand out the default" in readme
    rows = [line for line in bank.splitlines() if re.match(r"^\| [123] \|", line)]
    assert [r[2] for r in rows] == list("111222333"), rows
    for row in rows:
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        assert len(cells) == 5 and all(len(c) > 20 for c in cells[1:]), row
    assert "0 to 2 for the bank question" in bank and "0 to 2 for the follow-up" in bank
    for page in (ROOT / "book").glob("*.md"):  # the site shows none of the follow-ups
        text = page.read_text()
        assert "For tokens $\\pm1$ with equal probabilities, what are the coefficients" not in text
    Sigma = icl.kms_covariance(5, 0.5)
    noisy = icl.large_prompt_constants(Sigma, tau2=0.2, noise_var=0.5)
    assert f"{noisy.softmax:.2f}" == "24.86" and round(1000 * noisy.linear / noisy.softmax) == 241
    paper = icl.large_prompt_constants(Sigma, tau2=0.2, noise_var=0.1)
    A, b = icl.bayes_optimal_parameters(Sigma)
    at_one = 2 * icl.risk_fluctuation_constant(A, b, Sigma, tau2=0.2, noise_var=0.1) - paper.bayes
    assert f"From {at_one:.2f} at $r = 1$ to $C_{{\\rm soft}} = {paper.softmax:.2f}$" in bank
    assert f"a factor of about {at_one / paper.softmax:.2f}" in bank


@pytest.mark.book
def test_the_rehearsal_grades_a_mock_class_through_the_term(built):
    """``python rehearse.py`` in the built kit (the lecturer's rehearsal before term) grades its mock
    class of three through the whole term, every set, the hand marks, the report, the checks and the
    course grades, and finds every point and grade as the default scheme gives them (its own checks:
    ada 100.0, ben 7.5, cleo between, and each autograded question's points)."""
    import subprocess
    import sys

    assert (built / "rehearse.py").exists() and (built / "variants" / "rehearse.py").exists()
    proc = subprocess.run(
        [sys.executable, "rehearse.py"],
        cwd=built,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "every point and grade is as expected" in proc.stdout, proc.stdout[-2000:]
    graded = built / "rehearsal" / "graded"
    grades = {r["student"]: r for r in csv.DictReader((graded / "course-grades.csv").open())}
    assert sorted(grades) == ["ada", "ben", "cleo"], grades
    for name in SETS:  # the feedback a student gets, written with the hand marks
        assert len(list((graded / "feedback" / name).glob("*.md"))) == 3, name
    # the hard cases: their seven steps as expected, and the class of five graded
    assert "the hard cases too" in proc.stdout, proc.stdout[-2000:]
    steps = {
        line.split(": ", 2)[2][0]
        for line in proc.stdout.splitlines()
        if line.startswith("rehearse: as expected: ") and line[23].isdigit()
    }
    assert steps == set("1234567"), steps
    assert "NOT as expected" not in proc.stdout, proc.stdout[-3000:]
    hard = built / "rehearsal" / "hard" / "graded"
    grades = {r["student"]: r for r in csv.DictReader((hard / "course-grades.csv").open())}
    assert sorted(grades) == ["ada", "ben", "cleo", "dan", "eve"], grades
    assert all(r["course_percent"] for r in grades.values()), grades


# A cell a hostile student could add: each attempt's outcome goes to $REPORT (in graded/, writable).
HOSTILE = """
import json, os, socket
home, kit, tried = os.path.expanduser("~"), os.environ["KIT"], {}
def attempt(what, action):
    try:
        action()
        tried[what] = "succeeded"
    except Exception as exc:
        tried[what] = f"failed: {type(exc).__name__}: {exc}"
attempt("write home", lambda: open(os.path.join(home, "pwned.txt"), "w").write("x"))
attempt("write kit", lambda: open(os.path.join(kit, "pwned.txt"), "w").write("x"))
attempt("append to grade_all.py", lambda: open(os.path.join(kit, "grade_all.py"), "a").write("#"))
attempt("read ~/.ssh", lambda: open(os.path.join(home, ".ssh", "id_rsa")).read())
attempt("connect loopback", lambda: socket.create_connection(("127.0.0.1", int(os.environ["PORT"])), 3))
attempt("connect by address", lambda: socket.create_connection(("1.1.1.1", 53), 3))
with open(os.environ["REPORT"], "w") as f:
    json.dump(tried, f)
"""


@pytest.mark.book
def test_the_readme_s_sandbox_grades_alike_and_stops_a_hostile_notebook(built, tmp_path):
    """The kit README's bubblewrap command (``problem_sets.SANDBOX``), run as printed in a copy of the
    kit with a home of its own holding ``~/.ssh/id_rsa``, grades the solution with a hostile cell
    added: full marks, while the cell's writes to the home and the kit, its read of ``~/.ssh`` and
    its connections (to a port listening on this machine's loopback, and by address) all fail. Skipped
    where bubblewrap is not installed or cannot make its namespaces."""
    import hashlib
    import os
    import socket
    import subprocess
    import sys

    if not shutil.which("bwrap"):
        pytest.skip("bubblewrap is not installed (apt-get install bubblewrap)")
    probe = subprocess.run(
        ["bwrap", "--ro-bind", "/", "/", "--unshare-all", "true"], capture_output=True, check=False
    )
    if probe.returncode:
        pytest.skip(f"bwrap cannot make its namespaces here: {probe.stderr.decode()[-300:]}")
    import softlin

    source = Path(softlin.__file__).resolve()
    seen = [Path(p).resolve() for p in (sys.prefix, sys.base_prefix)]
    if source.is_relative_to("/tmp") and not any(source.is_relative_to(p) for p in seen):
        # an editable install from a checkout under /tmp (a fresh clone's CI run): the sandbox's
        # private /tmp hides it, as it would not hide the kit's wheel installed in the grading Python
        pytest.skip(
            f"softlin is imported from {source.parent}, under /tmp, which the sandbox hides"
        )
    assert problem_sets.SANDBOX in (built / "README.md").read_text()
    name = "ps1_measures"
    kit, home = tmp_path / "kit", tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("SECRET-KEY")
    kit.mkdir()
    shutil.copytree(built / name, kit / name)
    for file in [built / "grade_all.py", *built.glob("softlin-*.whl")]:
        shutil.copyfile(file, kit / file.name)
    before = hashlib.sha256((kit / "grade_all.py").read_bytes()).hexdigest()
    nb = json.loads((built / name / "autograder" / f"{name}.ipynb").read_text())
    at = next(i for i, c in enumerate(nb["cells"]) if "".join(c["source"]).startswith("def tilt_"))
    cell = {"cell_type": "code", "execution_count": None, "id": "hostile", "metadata": {}}
    nb["cells"].insert(at + 1, {**cell, "outputs": [], "source": HOSTILE.strip()})
    (kit / "set1").mkdir()
    (kit / "set1" / "hostile.ipynb").write_text(json.dumps(nb))
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.setblocking(False)
        env = dict(
            os.environ,
            HOME=str(home),
            PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            KIT=str(kit),
            PORT=str(listener.getsockname()[1]),
            REPORT=str(kit / "graded" / "hostile.json"),
        )
        done = subprocess.run(
            ["bash", "-c", problem_sets.SANDBOX],
            cwd=kit,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing reached it
    rows = list(csv.DictReader((kit / "graded" / f"grades-{name}.csv").open()))
    assert [r["file"] for r in rows] == ["hostile.ipynb"], rows
    assert float(rows[0]["auto_awarded"]) == problem_sets.points(name)[1] > 0, rows
    tried = json.loads((kit / "graded" / "hostile.json").read_text())
    assert sorted(tried) == sorted(
        ["write home", "write kit", "append to grade_all.py", "read ~/.ssh"]
        + ["connect loopback", "connect by address"]
    ), tried
    # the home it sees is an empty scratch folder: the write lands there and is gone with it
    assert not (home / "pwned.txt").exists() and sorted(os.listdir(home)) == [".ssh"]
    for what in tried.keys() - {"write home"}:
        assert tried[what].startswith("failed"), (what, tried[what])
    assert "Read-only file system" in tried["write kit"], tried
    assert "Read-only file system" in tried["append to grade_all.py"], tried
    assert "FileNotFoundError" in tried["read ~/.ssh"], tried
    assert not (kit / "pwned.txt").exists()
    assert hashlib.sha256((kit / "grade_all.py").read_bytes()).hexdigest() == before
    for file in (kit / "graded").rglob("*"):
        assert not file.is_file() or b"SECRET-KEY" not in file.read_bytes(), file
