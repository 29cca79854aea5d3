"""The quick quizzes (softlin.book.quiz, questions in book/data/quizzes.json).

* Every lesson of ``_toc.yml`` has two or three conceptual multiple-choice questions, each with exactly
  one right answer and an explanation for every answer, in plain text (Unicode, no TeX: the quiz must
  read the same where no MathJax runs, as in Colab's output frames).
* The quiz is HTML and CSS only (no script), so it works on the static site with no kernel, in Colab and
  in Jupyter; ``tests/test_colab.py`` runs the quizzes page (``book/quizzes.md``) in the fresh Colab-like
  environment, where ``show_quiz`` reads the questions that softlin ships.
* On the built site (browser): picking an answer shows its explanation, marked right or not, with no
  network request; the quizzes page shows every lesson's quiz, and every lesson page shows its own (the
  lesson's quiz cell, ``show_quiz("NN_name")`` tagged ``remove-input``).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import torch
from build_book import lessons, page_name
from softlin.book.quiz import Quiz, answer_key, quiz_questions, show_quiz

ROOT = Path(__file__).resolve().parents[1]
LESSONS = lessons(ROOT)
DATA = json.loads((ROOT / "book" / "data" / "quizzes.json").read_text())["lessons"]


@pytest.mark.parametrize("md", LESSONS, ids=page_name)
def test_every_lesson_has_two_or_three_questions_each_with_one_right_answer_and_explanations(md):
    questions = quiz_questions(md.stem)
    assert 2 <= len(questions) <= 3, f"{md.stem}: {len(questions)} questions"
    for q in questions:
        assert q["type"] == "multiple_choice" and len(q["question"]) > 20, q
        assert 3 <= len(q["answers"]) <= 5, q["question"]
        assert sum(a["correct"] for a in q["answers"]) == 1, q["question"]
        for a in q["answers"]:
            assert a["answer"].strip() and len(a["feedback"]) > 20, (q["question"], a)


def test_the_questions_are_plain_text():
    tex = re.compile(r"\$|\\\(|\\\[|\\[a-zA-Z]+|[_^]\{")
    for lesson, questions in DATA.items():
        for q in questions:
            texts = [q["question"]] + [a[k] for a in q["answers"] for k in ("answer", "feedback")]
            found = [t for t in texts if tex.search(t)]
            assert not found, f"{lesson}: TeX in a quiz (no MathJax in Colab's outputs): {found}"


def test_the_quiz_is_html_with_no_script_and_one_group_of_choices_per_question():
    quiz = show_quiz("03_concentration")
    assert isinstance(quiz, Quiz)
    html = quiz._repr_html_()
    assert "<script" not in html.lower()
    n = len(quiz.questions)
    assert html.count("<fieldset") == n and html.count('class="sq-fb sq-right"') == n
    names = set(re.findall(r'type="radio" name="([^"]+)"', html))
    assert len(names) == n  # one radio group per question, named after the lesson
    assert "Quick quiz (03_concentration)" in repr(quiz)


def _right(lesson: str, k: int) -> str:
    """The text of the answer marked right in question k (from 0) of ``lesson``'s quiz."""
    return next(a["answer"] for a in DATA[lesson][k]["answers"] if a["correct"])


def _balanced_end(sigma: torch.Tensor, steps: int = 20_000, lr: float = 0.01) -> float:
    """b at the end of gradient descent on R_inf(A, b) = 1/2 tr((b Sigma A - I) Sigma (b Sigma A - I)^T)
    from the balanced start A = 0.3 I, b = ||A||_F: the quiz's b*, found by running the flow rather than
    by its closed form."""
    a = (0.3 * torch.eye(len(sigma), dtype=torch.float64)).requires_grad_()
    b = torch.linalg.matrix_norm(a.detach()).clone().requires_grad_()
    eye = torch.eye(len(sigma), dtype=torch.float64)
    for _ in range(steps):
        m = b * sigma @ a - eye
        risk = 0.5 * torch.trace(m @ sigma @ m.T)
        ga, gb = torch.autograd.grad(risk, (a, b))
        with torch.no_grad():
            a -= lr * ga
            b -= lr * gb
    return float(b.detach())


def test_the_quizzes_numerical_answers_are_right():
    """Each quiz answer that is a number, recomputed independently of the lessons' formulas where a
    direct computation exists (a tilted mean from its two atoms, an effective sample size from sampled
    weights, b* by running gradient descent on the risk), and marked right in quizzes.json; a
    distractor that the explanation says is a tempting wrong value is checked to differ."""
    # lesson 1: the tilted mean of {0, 1} at a = ln 3, by its definition, against the first order
    w = torch.tensor([0.5, 0.5 * 3.0], dtype=torch.float64)  # 1/2 e^(a x) at x = 0, 1
    tilted = float(w[1] / w.sum())
    assert abs(tilted - 0.75) < 1e-12 and _right("01_measure_view", 1) == "0.75"
    assert abs((0.5 + 0.25 * math.log(3)) - 0.77) < 0.005, "the first-order distractor is not 0.77"
    # lesson 3: the effective sample size at Gamma = 2, a = 0.5, from 100 long prompts (L = 20 000);
    # its standard error over prompts is below 0.002, so 0.01 is five of them
    gen = torch.Generator().manual_seed(0)
    z = math.sqrt(2.0) * torch.randn(100, 20_000, generator=gen, dtype=torch.float64)
    p = torch.softmax(0.5 * z, dim=1)
    ess = (1 / (p**2).sum(dim=1) / z.shape[1]).mean()
    assert abs(float(ess) - 0.61) < 0.01 and _right("03_concentration", 1) == "0.61 L", float(ess)
    # lesson 5: b* for Sigma = diag(1/3, 1/4), by running the flow (gradient descent) to its end
    b_end = _balanced_end(torch.diag(torch.tensor([1 / 3, 1 / 4], dtype=torch.float64)))
    assert abs(b_end - math.sqrt(5)) < 1e-3, f"the flow ends at b = {b_end}, the quiz says sqrt 5"
    assert _right("05_icl_linear_regression", 2).startswith("√5 ≈ 2.24")


def test_the_answer_key_gives_each_question_s_right_letter_in_lesson_order():
    """The key on the quizzes page, read independently of it: the position of the one answer marked
    correct in quizzes.json, as the quiz labels it (a), (b), ..., quiz n being lesson n's."""
    key = answer_key()
    assert [n for n, _, _ in key.rows] == list(range(1, len(LESSONS) + 1)), key.rows
    for n, lesson, letters in key.rows:
        assert lesson == LESSONS[n - 1].stem, (n, lesson)
        expected = ["abcde"[[a["correct"] for a in q["answers"]].index(True)] for q in DATA[lesson]]
        assert letters == expected, f"quiz {n}: key {letters}, quizzes.json {expected}"
        assert f"quiz {n}: " + ", ".join(f"{i} ({x})" for i, x in enumerate(expected, 1)) in repr(
            key
        )
    assert key._repr_html_().count("<tr>") == len(LESSONS) + 1
    assert "answer_key()" in (ROOT / "book" / "quizzes.md").read_text(), "the page shows no key"


def test_an_unknown_lesson_says_which_quizzes_exist():
    with pytest.raises(KeyError, match="01_measure_view"):
        quiz_questions("99_nothing")
    with pytest.raises(TypeError):
        quiz_questions(3)


def test_the_quizzes_page_shows_every_lesson():
    text = (ROOT / "book" / "quizzes.md").read_text()
    shown = re.findall(r'show_quiz\("([^"]+)"\)', text)
    assert set(shown) >= {md.stem for md in LESSONS}, shown
    assert set(shown) <= set(DATA), shown


# --- on the built site --------------------------------------------------------------------------------


def _exercise_quizzes(page, url: str) -> list[dict]:
    """Open ``url``, and in every quiz pick a wrong answer then the right one; return what was seen."""
    page.goto(url, wait_until="load")
    seen = []
    for quiz in page.query_selector_all(".softlin-quiz"):
        for fieldset in quiz.query_selector_all("fieldset"):
            choices = fieldset.query_selector_all(".sq-a")
            hidden = all(not c.query_selector(".sq-fb").is_visible() for c in choices)
            wrong = next(c for c in choices if c.query_selector(".sq-wrong"))
            right = next(c for c in choices if c.query_selector(".sq-right"))
            wrong.query_selector("label").click()
            wrong_shown = wrong.query_selector(".sq-fb").inner_text()
            right.query_selector("label").click()
            seen.append(
                {
                    "hidden_before": hidden,
                    "wrong": wrong_shown,
                    "right": right.query_selector(".sq-fb").inner_text(),
                    "wrong_hidden_after": not wrong.query_selector(".sq-fb").is_visible(),
                }
            )
    return seen


def _assert_quizzes_work(seen, where):
    assert seen, f"{where}: no quiz on the page"
    for s in seen:
        assert s["hidden_before"], f"{where}: an explanation shows before any answer is picked"
        assert s["wrong"].startswith("Not quite."), (where, s)
        assert s["right"].startswith("Right."), (where, s)
        assert s["wrong_hidden_after"], f"{where}: picking another answer keeps the old explanation"


@pytest.mark.browser
@pytest.mark.book
def test_the_quizzes_page_works_without_a_kernel_or_network(offline_page):
    page, html, requests = offline_page
    del requests[:]
    seen = _exercise_quizzes(page, (html / "book" / "quizzes.html").as_uri())
    _assert_quizzes_work(seen, "quizzes page")
    assert len(seen) == sum(len(v) for v in DATA.values()), len(seen)
    assert all(u.startswith("file:") or u.startswith("data:") for u in requests), [
        u for u in requests if not u.startswith(("file:", "data:"))
    ]


@pytest.mark.browser
@pytest.mark.book
@pytest.mark.parametrize("md", LESSONS, ids=page_name)
def test_every_lesson_page_shows_its_quiz(offline_page, md):
    page, html, _ = offline_page
    seen = _exercise_quizzes(page, (html / "book" / f"{md.stem}.html").as_uri())
    assert len(seen) == len(quiz_questions(md.stem)), (
        f"{md.stem}: its page shows {len(seen)} quiz questions; the lesson needs its quiz cell "
        f'(show_quiz("{md.stem}"), tagged remove-input)'
    )
    _assert_quizzes_work(seen, md.stem)
