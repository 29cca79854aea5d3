"""Quick quizzes: a lesson's conceptual multiple-choice questions, with an explanation for every answer.

The questions live in one committed file, ``book/data/quizzes.json`` (shipped with softlin, so a
notebook in Colab reads the same file: :func:`softlin.book.committed_data`). A lesson shows its quiz with
one cell::

    from softlin.book.quiz import show_quiz
    show_quiz("01_measure_view")

The quiz is plain HTML and CSS, no JavaScript and no kernel: a reader picks an answer (a radio button)
and the explanation of that answer appears below it, marked right or not. It therefore works the same on
the book's static site, in Colab, in Jupyter and in VS Code, and prints as a list of questions. The file's
format is that of ``jupyterquiz`` (``question``, ``type: "multiple_choice"``, ``answers`` with
``answer``, ``correct`` and ``feedback``), so the same questions can also be shown with that package.
"""

from __future__ import annotations

import html

from . import committed_data

__all__ = ["AnswerKey", "Quiz", "answer_key", "quiz_questions", "show_quiz"]

QUIZ_FILE = "quizzes.json"

STYLE = """
.softlin-quiz { margin: 1em 0; max-width: 46em; }
.softlin-quiz { font-size: 1rem; }
.softlin-quiz .sq-head { margin: 0 0 0.4em 0; }
.softlin-quiz fieldset { border: 1px solid rgba(128,128,128,0.45); border-radius: 6px;
  margin: 0 0 0.8em 0; padding: 0.4em 0.9em 0.6em 0.9em; }
/* the question inside its box, not across its top border, however many lines it takes */
.softlin-quiz legend { font-size: 1rem; font-weight: 600; line-height: 1.4; padding: 0.2em 0 0.3em 0;
  margin: 0; width: 100%; float: left; }
.softlin-quiz legend + * { clear: both; }
.softlin-quiz .sq-a { margin: 0.25em 0; }
.softlin-quiz .sq-a input { margin-right: 0.5em; vertical-align: top; margin-top: 0.3em; }
.softlin-quiz .sq-a label { display: inline-block; max-width: 92%; cursor: pointer; }
.softlin-quiz .sq-fb { display: none; margin: 0.3em 0 0.5em 1.8em; padding: 0.3em 0.7em;
  border-left: 5px solid; border-radius: 3px; }
.softlin-quiz input:checked ~ .sq-fb { display: block; }
.softlin-quiz input:checked + label { font-weight: 600; }
.softlin-quiz .sq-right { border-color: #009E73; background: rgba(0,158,115,0.10); }
.softlin-quiz .sq-wrong { border-color: #D55E00; background: rgba(213,94,0,0.10); }
@media print { .softlin-quiz .sq-fb, .softlin-quiz .sq-screen { display: none !important; } }
.softlin-quiz .sq-print { display: none; }
@media print { .softlin-quiz .sq-print { display: inline; } }
.softlin-quiz .sq-ticket { display: none; }
/* the strip prints on the quiz sheet (the quizzes page), not with a lesson */
@media print {
  #quick-quizzes .softlin-quiz .sq-ticket { display: block; margin: 0.6em 0 0 0; padding: 0.5em 0.8em;
    border: 1px dashed #555; }
  .softlin-quiz .sq-box { display: inline-block; width: 1.8em; height: 1.5em; margin: 0 1.2em 0 0.3em;
    border: 1px solid #333; vertical-align: middle; }
}
"""


def _all_quizzes() -> dict:
    data = committed_data(QUIZ_FILE)
    if data is None:
        raise FileNotFoundError(
            f"{QUIZ_FILE} is in neither data/ beside this notebook nor the installed softlin; "
            "reinstall softlin from the book's repository"
        )
    return data["lessons"]


def quiz_questions(lesson: str) -> list[dict]:
    """The questions of ``lesson`` (a lesson's file name without suffix, e.g. ``"03_concentration"``),
    each ``{"question", "type", "answers": [{"answer", "correct", "feedback"}, ...]}``.

    Raises
    ------
    TypeError if ``lesson`` is not a str; KeyError (with the known lessons) if it has no quiz.
    """
    if not isinstance(lesson, str):
        raise TypeError(f"lesson must be a lesson's name (str), got {type(lesson).__name__}")
    quizzes = _all_quizzes()
    if lesson not in quizzes:
        raise KeyError(f"no quiz for lesson {lesson!r}; quizzes exist for {sorted(quizzes)}")
    return quizzes[lesson]


class Quiz:
    """A lesson's quiz; Jupyter, Colab and the book's site draw it from :meth:`_repr_html_`."""

    def __init__(self, lesson: str):
        self.lesson = lesson
        self.questions = quiz_questions(lesson)

    def _repr_html_(self) -> str:
        key = "".join(c if c.isalnum() else "-" for c in self.lesson)
        out = [
            f'<div class="softlin-quiz" id="softlin-quiz-{key}"><style>{STYLE}</style>',
            '<p class="sq-head"><strong>Quick quiz.</strong> <span class="sq-screen">Note your first '
            "answer's letter, then pick it: its explanation appears below it. Try the others too.</span>"
            '<span class="sq-print">Note the letter of your answer to each question: the class '
            "discusses them, and the quiz on the book's site explains every choice.</span></p>",
        ]
        for i, q in enumerate(self.questions, 1):
            out.append(f'<fieldset class="sq-q"><legend>{i}. {html.escape(q["question"])}</legend>')
            for j, a in enumerate(q["answers"], 1):
                name, ident = f"sq-{key}-{i}", f"sq-{key}-{i}-{j}"
                verdict = ("sq-right", "Right.") if a["correct"] else ("sq-wrong", "Not quite.")
                out.append(
                    f'<div class="sq-a"><input type="radio" name="{name}" id="{ident}">'
                    f'<label for="{ident}">({chr(96 + j)}) {html.escape(a["answer"])}</label>'
                    f'<div class="sq-fb {verdict[0]}" role="status"><strong>{verdict[1]}</strong> '
                    f"{html.escape(a['feedback'])}</div></div>"
                )
            out.append("</fieldset>")
        # printed only: a strip to cut off and hand in at the door (the entry ticket, unmarked)
        boxes = "".join(
            f'<span style="white-space:nowrap">{i}<span class="sq-box"></span></span>'
            for i in range(1, len(self.questions) + 1)
        )
        out.append(
            '<p class="sq-ticket">Entry ticket (not marked). Name: '
            '<span style="display:inline-block;width:16em;border-bottom:1px solid #333">'
            f"</span><br>Your letters, question by question: {boxes}</p>"
        )
        out.append("</div>")
        return "\n".join(out)

    def __repr__(self) -> str:
        lines = [f"Quick quiz ({self.lesson}); open the notebook in Jupyter or Colab to answer it."]
        for i, q in enumerate(self.questions, 1):
            lines.append(f"{i}. {q['question']}")
            lines += [f"   ({chr(96 + j)}) {a['answer']}" for j, a in enumerate(q["answers"], 1)]
        return "\n".join(lines)


def show_quiz(lesson: str) -> Quiz:
    """The quiz of ``lesson`` (the last expression of a cell, it is drawn below the cell)."""
    return Quiz(lesson)


class AnswerKey:
    """The letters of the right answers of every quiz, one row per lesson, for a lecturer to print."""

    def __init__(self):
        self.rows = []
        for lesson, questions in sorted(_all_quizzes().items()):
            letters = []
            for q in questions:
                right = [chr(97 + j) for j, a in enumerate(q["answers"]) if a["correct"]]
                if len(right) != 1:
                    raise ValueError(
                        f"{QUIZ_FILE}: a question of {lesson} has {len(right)} right answers, "
                        f"expected one: {q['question']!r}"
                    )
                letters.append(right[0])
            self.rows.append((int(lesson.split("_")[0]), lesson, letters))  # 01_... is quiz 1

    def _repr_html_(self) -> str:
        head = "<tr><th>quiz</th><th>right answers, question by question</th></tr>"
        body = "".join(
            f"<tr><td>{n}</td><td>"
            + ", ".join(f"{i}&nbsp;({letter})" for i, letter in enumerate(letters, 1))
            + "</td></tr>"
            for n, _, letters in self.rows
        )
        return f'<table class="softlin-quiz-key"><thead>{head}</thead><tbody>{body}</tbody></table>'

    def __repr__(self) -> str:
        return "\n".join(
            f"quiz {n}: " + ", ".join(f"{i} ({letter})" for i, letter in enumerate(letters, 1))
            for n, _, letters in self.rows
        )


def answer_key() -> AnswerKey:
    """The answer key of every quiz (the last expression of a cell, it is drawn below the cell).

    Raises ValueError if a question has no right answer or more than one."""
    return AnswerKey()
