"""The written check (tools/written_check.py, built by `make problem-sets`): a sheet ready to print and its
answer key.

* The sheet: the title, "30 minutes, closed book, pen and paper", three questions of 4 points, one per
  set, with parts (a) 2, (b) 1, (c) 1 and room to write; self-contained HTML (no script, no link) with
  an A4 print style; where headless Chromium and pdfinfo are installed, it prints on at most 2 pages.
* The key: every part's answer with its numbers and its scoring (full, half, none), 0 to 4 per question
  on the oral bank's scale; the sheet shows none of the answers.
* One set at a time (``--set N``, the default grading's ten-minute checks): the whole check's question N
  for the same seed, word for word, as the one question of its own sheet and key, printing on one page;
  a set other than 1, 2 or 3 is refused, and the shipped copy takes ``--set`` too.
* The key's numbers, checked by routes independent of the library: set 1 by quadrature of the tilted
  Gamma law (relative 1e-8) and of its third cumulant (1e-7); set 2 by quadrature of the query average of
  C_1 (1e-8) and the closed forms of the threshold and of L e^{-s} (1e-12); set 3 by the closed forms of
  b*^2 and C_lin (1e-9, 1e-6), of the border d = 4c^2 and by lesson 6's formula for C_soft in u^2,
  minimised with scipy (1e-6).
* Inputs: the default's are numbers other than the bank's printed follow-ups; a variant's are drawn from
  its seed, the same on every call: each set's form (set 1: Gamma tokens or a two-point law; set 2: the
  tokens' or the queries' variance changed; set 3: Sigma = c I_d or two blocks), every form of each set
  drawn by some seed of 1 to 40, then its numbers, every number of the key differing from the default
  key's where the two share a form (seed 7 among others), with set 1's Gamma shape and two-point law
  other than the variant's problem set 1's. Set 1's two-point law is checked by direct sums, set 2's
  query form by quadrature over queries N(0, q^2), set 3's two blocks as the isotropic form.
* Without the repository: the build folder's copy of written_check.py (``problem_sets.add_written_check``,
  which ``make problem-sets`` runs), run in an empty folder with ``--seed 7`` and only lib/ on the path
  (as the folder's softlin wheel gives; no tools/, and a ``problem_sets`` there fails on import), writes
  the same sheet and key as the build of variant 7 (byte-identical Markdown and HTML); it draws set 1's
  shape as ``problem_sets.parameters`` does (one implementation, ``written_check.set_draws``).
* Errors name the argument, what was received and what was expected.
"""

from __future__ import annotations

import math
import random
import re
import shutil
import subprocess
from pathlib import Path

import problem_sets
import pytest
import written_check

SEEDS = [None, 7, 2025, 1, 2, 3]  # between them, both forms of every set


def _key(seed):
    return written_check.key(written_check.inputs(seed))


@pytest.mark.parametrize("seed", SEEDS)
def test_set_1_numbers_agree_with_quadrature(seed):
    from scipy.integrate import quad

    one = _key(seed)["ps1"]
    if one["form"] == "two-point":
        _check_two_point(one)
        return
    k, lam, a = one["k"], one["lam"], one["a"]
    assert a < lam, "the tilt asked about must be one where the limit exists"

    def moment(t, f):  # E[e^{tX} f(X)] for Gamma(k, lam), by quadrature
        dens = lam**k / math.factorial(k - 1)
        return quad(lambda x: dens * x ** (k - 1) * math.exp((t - lam) * x) * f(x), 0, math.inf)[0]

    T = moment(a, lambda x: x) / moment(a, lambda x: 1.0)
    assert abs(one["T"] - T) < 1e-8 * abs(T), (seed, one["T"], T)
    mean = moment(0, lambda x: x)
    kappa3 = moment(0, lambda x: (x - mean) ** 3)  # the third cumulant is the third central moment
    assert abs(one["kappa3"] - kappa3) < 1e-7 * kappa3, (seed, one["kappa3"], kappa3)
    assert one["coefficient"] == pytest.approx(kappa3 / 2, rel=1e-7)
    # the public answers do not pass: the exponential law's 1/(lam - a), the shape-1 coefficient
    assert abs(1 / (lam - a) - T) > 0.3 * T and abs(1 / lam**3 - kappa3 / 2) > 0.3 * kappa3 / 2


def _check_two_point(one):
    """Set 1's second form by direct sums over the two atoms: the tilted mean and the third central
    moment (the third cumulant)."""
    x1, x2, p, a = one["x1"], one["x2"], one["p"], one["a"]
    atoms = ((x1, p), (x2, 1 - p))
    weights = [(x, w * math.exp(a * x)) for x, w in atoms]
    T = sum(x * w for x, w in weights) / sum(w for _, w in weights)
    assert abs(one["T"] - T) < 1e-12 * max(abs(T), 1), (one["T"], T)
    mean = sum(x * w for x, w in atoms)
    kappa3 = sum(w * (x - mean) ** 3 for x, w in atoms)
    assert abs(one["kappa3"] - kappa3) < 1e-9 * max(abs(kappa3), 1e-3), (one["kappa3"], kappa3)
    assert one["coefficient"] == pytest.approx(kappa3 / 2, rel=1e-9)
    assert p != 0.5 and abs(kappa3) > 1e-3, "a symmetric law has no a^2 term to ask about"
    assert x1 < T < x2


@pytest.mark.parametrize("seed", SEEDS)
def test_set_2_numbers_agree_with_quadrature_and_closed_forms(seed):
    from scipy.integrate import quad

    two = _key(seed)["ps2"]
    s2, u, z = two["sigma2"], two["u"], two["z"]
    q2 = two.get("q2", 1.0)  # the queries' variance: 1 in the first form
    assert two["form"] == ("token variance" if "q2" not in two else "query variance")
    assert s2 * q2 * two["threshold"] ** 2 == pytest.approx(0.5, rel=1e-12)
    assert u < two["threshold"], "the scale asked about must have a finite average"
    s = s2 * u * u * z * z
    assert two["s"] == pytest.approx(s, rel=1e-12)
    if two["form"] == "token variance":
        assert two["tokens"] == pytest.approx(two["L"] * math.exp(-s), rel=1e-12)
    else:  # the shortest prompt with L e^{-s} >= N
        L = two["length"]
        assert L * math.exp(-s) >= two["N"] * (1 - 1e-12) > (L - 1) * math.exp(-s), (L, s)

    def c1(x):  # C_1(z) times the density of the query z ~ N(0, q^2)
        return (
            math.exp(s2 * u * u * x * x - x * x / (2 * q2))
            * (s2 + s2 * s2 * u * u * x * x)
            / math.sqrt(2 * math.pi * q2)
        )

    averaged = quad(c1, -math.inf, math.inf)[0]
    assert abs(two["averaged"] - averaged) < 1e-8 * averaged, (seed, two["averaged"], averaged)


@pytest.mark.parametrize("seed", SEEDS)
def test_set_3_numbers_agree_with_closed_forms_and_lesson_6_s_formula(seed):
    from scipy.optimize import minimize_scalar

    three = _key(seed)["ps3"]
    tau2, gamma2, L = three["tau2"], three["gamma2"], three["L"]
    if three["form"] == "isotropic":
        c, d = three["c"], three["d"]
        assert c != 1, "Sigma = I_d is the bank's own follow-up"
        assert three["b2"] == pytest.approx(math.sqrt(d) / c, rel=1e-9)
        assert three["border"] == 4 * c * c and d != three["border"]
        assert three["finite"] == (d > 4 * c * c) and three["d_min"] == math.floor(4 * c * c) + 1
        trace = c * d
    else:  # two blocks: b*^4 = tr Sigma^-2; finite iff b*^2 > 2, the smallest such d1
        c1, c2, d1, d2 = three["c1"], three["c2"], three["d1"], three["d2"]
        assert c1 != c2
        b4 = d1 / c1**2 + d2 / c2**2
        assert three["b2"] == pytest.approx(math.sqrt(b4), rel=1e-9)
        assert three["finite"] == (b4 > 4) and b4 != 4
        n = three["d_min"]
        assert n / c1**2 + d2 / c2**2 > 4 and (n == 1 or (n - 1) / c1**2 + d2 / c2**2 <= 4), n
        d, trace = d1 + d2, c1 * d1 + c2 * d2
    assert three["C_lin"] == pytest.approx(tau2 * (d + 1) * trace, rel=1e-6)
    # lesson 6: C1bar / (tau^2 tr Sigma) = (1/v)(1 - 2v)^(-d/2) (1 + rho + v / (1 - 2v)), v = u^2,
    # rho = gamma^2 / (tau^2 tr Sigma); C_soft subtracts the Bayes risk's gamma^2 d
    rho = gamma2 / (tau2 * trace)

    def phi(v):
        return (1 + rho + v / (1 - 2 * v)) / (v * (1 - 2 * v) ** (d / 2))

    best = minimize_scalar(
        phi, bounds=(1e-9, 0.5 - 1e-9), method="bounded", options={"xatol": 1e-12}
    )
    soft = tau2 * trace * best.fun - gamma2 * d
    assert abs(three["C_soft"] - soft) < 1e-6 * soft, (seed, three["C_soft"], soft)
    assert three["matched"] == pytest.approx(L * three["C_lin"] / round(soft, 2), rel=1e-9)


def test_the_default_inputs_are_not_the_bank_s_follow_ups():
    """The bank's follow-ups: a Gamma law of general shape k (the default set 1 asks about shape 1),
    L = 1000 with s = 2 and 8, Sigma = I_d, the paper's covariance with gamma^2 = 0.5: the default sheet
    takes other numbers, and none of the bank's printed answers is a number of its key."""
    x = written_check.inputs(None)
    assert x == written_check.DEFAULT and x is not written_check.DEFAULT
    assert x["ps1"]["k"] not in (1, problem_sets.parameters()["ps1_measures"]["shape"])
    assert x["ps2"]["L"] != 1000 and x["ps3"]["c"] != 1 and x["ps3"]["gamma2"] != 0.5
    printed = {}  # the numbers of each set's follow-up answers in the bank
    for row in problem_sets.ORAL_CHECKS.read_text().splitlines():
        if re.match(r"^\| [123] \|", row):
            answer = row.strip().strip("|").split("|")[4]
            found = re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])", answer)
            printed.setdefault(f"ps{row[2]}", set()).update(float(n) for n in found)
    assert all(printed.get(f"ps{n}") for n in (1, 2, 3)), printed
    for name, value in written_check.numbers(_key(None)).items():
        if name == "ps1 domain":  # the rate the question states (a < lam), not a computed answer
            continue
        bank = printed[name.split()[0]]
        assert all(abs(value - p) > 1e-3 * max(p, 1) for p in bank), (name, value, bank)


@pytest.mark.parametrize("seed", [7, 2025, 1, 2, 3])
def test_a_variant_s_key_shares_no_number_with_the_default_s(seed):
    default = written_check.numbers(_key(None))
    x = written_check.inputs(seed)
    assert x == written_check.inputs(seed), "a seed's draw is the same on every call"
    ours = written_check.numbers(written_check.key(x))
    shared = set(ours) & set(default)
    assert {"ps1 T", "ps2 threshold", "ps3 b2", "ps3 matched"} <= shared
    for name in shared:  # each answer moves: the default key answers no part of the variant
        assert abs(ours[name] - default[name]) > 1e-6 * abs(default[name]), (seed, name)
    sets = problem_sets.parameters(seed)["ps1_measures"]
    if x["ps1"]["form"] == "gamma":
        assert x["ps1"]["k"] != sets["shape"], "set 1's shape must not be the variant's set 1's"
    # the variant's sets keep their numbers: the written check draws from a stream of its own
    assert problem_sets.parameters(seed) == problem_sets.parameters(seed)


@pytest.mark.parametrize("seed", [54, 65, 82, 85, 114])
def test_no_two_answers_of_one_question_coincide(seed):
    """Gamma tokens with lam = 0.5 and a = 0.375 have T(a) = k / (lam - a) equal to the a^2
    coefficient k / lam^3 (both 8k): these seeds drew it before the check redrew, and now draw
    another; every answer of a question differs from the others at three significant digits."""
    ours = written_check.numbers(written_check.key(written_check.inputs(seed)))
    for p in ours:
        for q in ours:
            if p < q and p.split()[0] == q.split()[0]:
                assert abs(ours[p] - ours[q]) > 1e-3 * max(abs(ours[p]), abs(ours[q])), (
                    seed,
                    p,
                    q,
                )
    planted = {"ps1 T": 16.0, "ps1 coefficient": 16.0, "ps2 threshold": 0.5}
    assert written_check.coincident(planted) == [("ps1 T", "ps1 coefficient")]


def test_no_variant_is_answered_by_the_oral_bank():
    """Queries with sigma^2 q^2 = 1 have the standard model's threshold u = 1/sqrt(2), the bank's answer,
    which the key scores 0 (the r48 lecturer's seed drew one in 29 of 400 seeds): over 120 seeds no
    answer of a variant is the bank's with its inputs, nor two answers of one question alike (120
    seeds: without the guard about 8 of them would draw the bank's threshold)."""
    planted = dict(written_check.DEFAULT)
    planted["ps2"] = {
        "form": "query variance",
        "sigma2": 2.0,
        "q2": 0.5,
        "u": 0.2,
        "z": 1.0,
        "N": 50,
    }
    ours = written_check.numbers(written_check.key(planted))
    assert ours["ps2 threshold"] == pytest.approx(1 / math.sqrt(2))
    assert written_check.repeats_bank(ours, planted) == ["ps2 threshold"]
    for seed in range(10_000_000, 10_000_120):
        x = written_check.inputs(seed)
        ours = written_check.numbers(written_check.key(x))
        assert not written_check.repeats_bank(ours, x), (seed, x)
        assert not written_check.coincident(ours), (seed, x)


def test_seed_7_asks_other_numbers_than_the_default(tmp_path):
    default = written_check.build(tmp_path / "default", None, pdf=False)
    variant = written_check.build(tmp_path / "variant", 7, pdf=False)
    texts = {p.name: p.read_text() for p in default}
    for path in variant:
        assert path.read_text() != texts[path.name], path.name
    key7 = (tmp_path / "variant" / "written-check-key.md").read_text()
    assert "(variant)" in key7 and " 7" not in key7.split("\n", 1)[0], "the seed is not printed"
    d7, d0 = written_check.numbers(_key(7)), written_check.numbers(_key(None))
    assert d7["ps1 T"] != d0["ps1 T"] and d7["ps3 matched"] != d0["ps3 matched"]


@pytest.mark.parametrize("seed", [None, 7, 2025, 2])
def test_the_sheet_and_the_key(tmp_path, seed):
    written = written_check.build(tmp_path, seed, pdf=False)
    assert [p.name for p in written] == list(written_check.FILES)
    k = _key(seed)
    for ext in ("md", "html"):
        sheet = (tmp_path / f"written-check.{ext}").read_text()
        key = (tmp_path / f"written-check-key.{ext}").read_text()
        assert "30 minutes, closed book, pen and paper" in sheet
        assert [int(n) for n in re.findall(r"Question (\d) \(4 points\)", sheet)] == [1, 2, 3]
        assert ("(variant)" in sheet) == (seed is not None)
        parts = re.findall(r"\(([abc])\)(?:</strong>|\*\*) \[(\d)", sheet)
        assert parts == [("a", "2"), ("b", "1"), ("c", "1")] * 3, parts
        assert "Answer." not in sheet and key.count("Answer.") == 9
        assert "For graders only" in key and "0 to 4 per question" in key
        assert "0 to 2" in key
        # the key's numbers are printed in it, and the answers' numbers are not on the sheet
        g = written_check.g
        two = k["ps2"]
        count = written_check.count(two["tokens"]) if "tokens" in two else f"{two['length']}"
        for shown in (
            g(k["ps1"]["T"]),
            g(k["ps1"]["coefficient"]),
            g(two["threshold"]),
            count,
            g(two["averaged"]),
            g(k["ps3"]["b2"]),
            f"{k['ps3']['matched']:.0f}",
        ):
            assert shown in key, shown
        for hidden in (g(k["ps2"]["threshold"]), g(k["ps2"]["averaged"]), g(k["ps3"]["b2"])):
            if len(hidden) > 2:  # a one- or two-character number ("1") is on any sheet
                assert hidden not in sheet, hidden
        assert f"{k['ps3']['C_soft_printed']:.2f}" in sheet  # the question states C_soft
    page = (tmp_path / "written-check.html").read_text()
    assert page.count('class="space"') == 9 and "size: A4" in page
    for html in (page, (tmp_path / "written-check-key.html").read_text()):
        assert "<script" not in html and not re.search(r"""(src|href)=["']?(https?:|//)""", html)


@pytest.mark.parametrize("problem_set", written_check.SETS)
@pytest.mark.parametrize("seed", [None, 2025])
def test_a_one_set_check_is_that_set_s_question_of_the_whole_check(tmp_path, seed, problem_set):
    """``--set N`` (the default grading's ten-minute check at the start of a session): one question of 4
    points, the whole check's question N for the same seed, word for word but for its number."""
    whole = tmp_path / "whole"
    written_check.build(whole, seed, pdf=False)
    one = tmp_path / "one"
    written = written_check.build(one, seed, pdf=False, problem_set=problem_set)
    names, _ = written_check.files(problem_set)
    assert [p.name for p in written] == list(names), [p.name for p in written]
    assert all(n.startswith(f"written-check-set{problem_set}") for n in names), names
    sheet, key = (one / names[0]).read_text(), (one / names[2]).read_text()
    assert f"on problem set {problem_set}" in sheet.split("\n", 1)[0], sheet.split("\n", 1)[0]
    assert "10 minutes, closed book, pen and paper" in sheet and "30 minutes" not in sheet
    assert re.findall(r"Question (\d) \(4 points\)", sheet) == ["1"], "one question, numbered 1"
    assert "Answer." not in sheet and key.count("Answer.") == 3
    assert "12 in all" not in key and "Scoring, 0 to 4" in key

    def question(text: str, number: int) -> str:
        body = text.split(f"## Question {number} (4 points).", 1)[1]
        return body.split("\n## ", 1)[0].split("\nThe numbers of this key", 1)[0]

    whole_key = (whole / "written-check-key.md").read_text()
    whole_sheet = (whole / "written-check.md").read_text()
    assert question(sheet, 1) == question(whole_sheet, problem_set)
    assert question(key, 1) == question(whole_key, problem_set)


def test_a_one_set_check_rejects_another_set(tmp_path):
    for bad in (0, 4, "1", True):
        with pytest.raises(
            ValueError, match=r"problem_set must be one of \(1, 2, 3\) or None, got"
        ):
            written_check.build(tmp_path, None, pdf=False, problem_set=bad)
    assert not list(tmp_path.glob("written-check*")), "nothing is written for a bad set"


def _printer():
    return written_check.chromium() and shutil.which("pdfinfo")


@pytest.mark.skipif(not _printer(), reason="needs headless Chromium and pdfinfo (poppler-utils)")
@pytest.mark.parametrize("seed", [None, 7, 2025, 2])
def test_the_sheet_prints_on_at_most_two_a4_pages(tmp_path, seed):
    written = written_check.build(tmp_path, seed)
    assert [p.name for p in written] == [*written_check.FILES, *written_check.PDFS]
    pages = written_check.pdf_pages(tmp_path / "written-check.pdf")
    assert pages is not None and 1 <= pages <= written_check.MAX_PAGES, pages
    import subprocess

    info = subprocess.run(
        ["pdfinfo", str(tmp_path / "written-check.pdf")], capture_output=True, text=True, check=True
    ).stdout
    width, height = map(float, re.search(r"Page size:\s+([\d.]+) x ([\d.]+) pts", info).groups())
    assert abs(width - 595.3) < 2 and abs(height - 841.9) < 2, "A4"
    assert written_check.pdf_pages(tmp_path / "written-check-key.pdf") >= 1
    for n in written_check.SETS:  # the ten-minute check on one set: one page
        written_check.build(tmp_path, seed, problem_set=n)
        pages = written_check.pdf_pages(tmp_path / f"written-check-set{n}.pdf")
        assert pages == 1, f"set {n}'s check prints on {pages} pages, not 1"


def test_a_build_without_chromium_writes_html_and_markdown(tmp_path, monkeypatch):
    monkeypatch.setattr(written_check, "chromium", lambda: None)
    (tmp_path / "written-check.pdf").write_text("stale")
    written = written_check.build(tmp_path, None)
    assert [p.name for p in written] == list(written_check.FILES)
    assert not (tmp_path / "written-check.pdf").exists(), "a stale PDF of other inputs stays"


def test_bad_arguments_name_themselves(tmp_path):
    with pytest.raises(TypeError, match=r"variant must be an integer seed or None.*'7'.*str"):
        written_check.inputs("7")
    with pytest.raises(TypeError, match=r"variant must be an integer seed or None.*True"):
        written_check.inputs(True)
    with pytest.raises(TypeError, match=r"out must be a pathlib.Path.*str"):
        written_check.build(str(tmp_path), None, pdf=False)


ROOT = Path(__file__).resolve().parents[1]


def _standalone(folder: Path, *args: str) -> subprocess.CompletedProcess:
    """Run ``folder/written_check.py`` in ``folder`` with only lib/ on the path, as a wheel install gives:
    no tools/ (and a ``problem_sets`` beside it that fails on import)."""
    from conftest import run_with_library_only

    (folder / "problem_sets.py").write_text(
        'raise ImportError("the shipped written_check.py imports problem_sets")\n'
    )
    return run_with_library_only(str(folder / "written_check.py"), *args, cwd=folder)


def test_the_shipped_generator_writes_a_seed_s_check_without_the_repository(tmp_path):
    built = tmp_path / "problem-sets-variant-7"  # what `make problem-sets VARIANT=7` writes for it
    written = problem_sets.add_written_check(built, 7)
    assert built / "written_check.py" in written
    assert (built / "written_check.py").read_bytes() == Path(written_check.__file__).read_bytes()
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copyfile(built / "written_check.py", alone / "written_check.py")
    done = _standalone(alone, "--seed", "7")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "fewer than eight digits" in done.stderr  # a short seed is easy to guess
    out = alone / "written-check-7"  # the default --out: beside the script
    for name in written_check.FILES:
        assert (out / name).read_bytes() == (built / name).read_bytes(), name
    pdfs = [name for name in written_check.PDFS if (built / name).exists()]
    assert [name for name in written_check.PDFS if (out / name).exists()] == pdfs
    # and --out DIR, with the PDFs left out
    done = _standalone(alone, "--seed", "7", "--out", "elsewhere", "--no-pdf")
    assert done.returncode == 0, done.stderr[-3000:]
    assert (alone / "elsewhere" / "written-check-key.md").read_bytes() == (
        built / "written-check-key.md"
    ).read_bytes()
    done = _standalone(alone, "--seed", "7", "--set", "2", "--out", "set2", "--no-pdf")
    assert done.returncode == 0, done.stderr[-3000:]
    assert (alone / "set2" / "written-check-set2-key.md").read_bytes() == (
        written_check.build(tmp_path / "set2", 7, pdf=False, problem_set=2)[2].read_bytes()
    )
    done = _standalone(alone, "--seed", "7", "--set", "4")
    assert done.returncode == 2 and "argument --set: invalid choice: 4" in done.stderr, done.stderr


def test_the_shipped_generator_needs_a_seed_and_names_a_bad_one(tmp_path):
    shutil.copyfile(written_check.__file__, tmp_path / "written_check.py")
    done = _standalone(tmp_path)
    assert done.returncode == 2 and "argument --seed: got none, expected an integer" in done.stderr
    done = _standalone(tmp_path, "--seed", "seven")
    assert done.returncode == 2, done.stderr
    assert re.search(r"argument --seed.*got 'seven', expected an integer", done.stderr), done.stderr
    assert not list(tmp_path.glob("written-check*"))


@pytest.mark.parametrize("seed", [None, 1, 7, 2025, 12345678])
def test_set_1_s_shape_is_drawn_once_for_the_sets_and_the_check(seed):
    """The sets' inputs start with written_check.set_draws (one implementation): the shape the written
    check avoids is the variant's problem set 1's."""
    shape = problem_sets.parameters(seed)["ps1_measures"]["shape"]
    if seed is None:
        assert shape == 1
    else:
        assert written_check.set_1_shape(seed) == shape in (2, 3)
        ps1 = written_check.inputs(seed)["ps1"]
        assert ps1["form"] != "gamma" or ps1["k"] != shape
    assert problem_sets.DEFAULT_RATE == written_check.DEFAULT_RATE


def test_each_set_s_form_is_drawn_from_the_seed():
    """Both forms of every set occur among seeds 1 to 40, in several combinations (a key learnt by heart
    answers at most the forms it shares); a two-point law is never the variant's problem-set law, nor
    the default sets'."""
    forms = [written_check.inputs(s) for s in range(1, 41)]
    for q, options in written_check.FORMS.items():
        assert {x[q]["form"] for x in forms} == set(options), q
    assert len({tuple(x[q]["form"] for q in ("ps1", "ps2", "ps3")) for x in forms}) >= 6
    for s, x in enumerate(forms, 1):
        if x["ps1"]["form"] == "two-point":
            law = (x["ps1"]["x1"], x["ps1"]["x2"], x["ps1"]["p"])
            sets = problem_sets.parameters(s)["ps1_measures"]
            assert law != (sets["x1"], sets["x2"], sets["p1"]), s  # the variant's set 1 law
            assert law != written_check.DEFAULT_LAW[:3], s
    with pytest.raises(ValueError, match=r"ps2: form must be one of"):
        written_check.key({**written_check.DEFAULT, "ps2": {"form": "other"}})


def test_two_seeds_rarely_share_a_set_1_sheet():
    """Set 1's question is drawn from some twenty thousand forms (its tilt on a 0.01 grid, wide rates
    and two-point laws), so 300 draws, about 45 000 pairs, repeat a set-1 question about 3 times on
    average (Poisson, standard deviation 1.7): at most 12 repeats pass. The grid of before (about 300
    forms) gave some 175, so the test has the power to see a shrunken draw. Drawn with
    ``written_check._draw`` (no key computed: the redraws of :func:`written_check.inputs`, rare, only
    remove forms)."""
    drawn = [
        tuple(
            sorted(
                written_check._draw(random.Random(f"seed {s}"), 2, written_check.DEFAULT_LAW)[
                    "ps1"
                ].items()
            )
        )
        for s in range(300)
    ]
    repeats = len(drawn) - len(set(drawn))
    assert repeats <= 12, f"{repeats} of 300 draws repeat another draw's set-1 question"
