"""Try every exercise self-check of a chapter on its own folded solution and on a wrong answer.

The convention (README, "Writing or editing a chapter", item 4): right after an ``{exercise}`` block, a
visible cell tagged ``exercise-check`` runs ``answer = None`` and ``answer_check("<label>", answer, ...)``,
whose key ``softlin.book.exercises`` registers (a draft may instead define ``check_<label> =
answer_check(...)`` in a key cell tagged ``remove-cell`` and call ``check_<label>(answer)``);
the folded ``{solution} <label>`` holds a fenced ``python`` block that ends by assigning ``answer = ...``.

:func:`inject` puts one hidden cell (tagged ``remove-cell`` and ``exercise-harness``) after each
``exercise-check`` cell. When the chapter runs, that cell executes the solution's code in a copy of the
chapter's namespace (with every ``torch.Generator`` of the namespace and the global random states restored
afterwards, so that later cells see what they would have seen), calls the check on its ``answer``
(expected: accepted), then on a wrong answer derived from it (every entry moved by 0.37 times the largest
entry, or the function's values moved so; expected: rejected), and, when the exercise's key states a
precision (``digits``, "to three significant digits"), on the answer rounded to that precision
(expected: accepted) and moved by one and a half units of its last asked digit (expected: rejected); it
prints one ``SOFTLIN-EXERCISE {json}`` line. :func:`collect` reads those records back from the executed
notebook. ``tools/build_book.py --exercise-checks`` does both; ``tests/test_exercises.py`` and
``tests/test_kit_exercises.py`` (the stated precision) assert on the records.
"""

from __future__ import annotations

import json
import re

import nbformat

TAG_CHECK, TAG_HARNESS = "exercise-check", "exercise-harness"
MARK = "SOFTLIN-EXERCISE "
CHECK_CALL = re.compile(r"\b(check_\w+)\s*\(\s*answer\s*\)")
SOLUTION = re.compile(
    r"^(?P<fence>`{3,}|:{3,})\{solution\}\s*(?P<label>\S+)[^\n]*\n(?P<body>.*?)^(?P=fence)[ \t]*$",
    re.MULTILINE | re.DOTALL,
)
PYTHON_BLOCK = re.compile(
    r"^(?P<fence>`{3,})python[ \t]*\n(?P<code>.*?)^(?P=fence)[ \t]*$", re.MULTILINE | re.DOTALL
)
RELATIVE_ERROR = (
    0.37  # the wrong answer's relative error: above any sensible rtol, and an unusual number
)

HARNESS = r"""
def _softlin_try_exercise(check, solution, label, shift=%(shift)r):
    import contextlib, io, json, math, random, re
    import numpy as np
    import torch

    space = globals()
    generators = {k: v.get_state() for k, v in space.items() if isinstance(v, torch.Generator)}
    states = torch.get_rng_state(), np.random.get_state(), random.getstate()

    def flat(x):
        if isinstance(x, torch.Tensor):
            return x.detach().cpu().double().numpy().ravel()
        return np.asarray(x, dtype=float).ravel()

    def wrong(x):
        if callable(x):
            return lambda *args: wrong(x(*args))
        scale = float(np.abs(flat(x)).max()) if flat(x).size else 0.0
        x = np.asarray(x, dtype=float) if isinstance(x, (list, tuple)) else x
        return x + (shift * scale if scale > 0 else 1.0)

    def revealed(key, message, shift):
        # A number printed with at least 2 significant digits that is an entry of the key rounded to those
        # digits. Counts and indices (integers of 1-2 digits) and the relative error are not evidence.
        import decimal

        found = set()
        for token in re.findall(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?", message):
            d = decimal.Decimal(token)
            significant = len(d.normalize().as_tuple().digits) if d else 0
            if re.fullmatch(r"[-+]?\d{1,2}", token) or abs(float(d) - shift) < 1e-12 or significant < 2:
                continue
            half_unit = float(decimal.Decimal(1).scaleb(d.as_tuple().exponent)) / 2
            found.update(float(k) for k in key if abs(float(k) - float(d)) <= half_unit * (1 + 1e-9))
        return sorted(found)

    def at_precision(x, digits, units):
        # x with every entry rounded to the unit of the last asked significant digit of its largest
        # entry, then moved by `units` such units (a function: its values, at each input)
        if callable(x):
            return lambda *args: at_precision(x(*args), digits, units)
        arr = (x.detach().cpu().double().numpy() if isinstance(x, torch.Tensor)
               else np.asarray(x, dtype=float))
        scale = float(np.abs(arr).max()) if arr.size else 0.0
        if scale == 0:
            return arr + units
        unit = 10.0 ** (math.floor(math.log10(scale)) - digits + 1)
        return np.round(arr / unit) * unit + units * unit

    def run(answer):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            ok = check(answer)
        return bool(ok), out.getvalue().strip()

    record = {"label": label}
    try:
        scope = dict(space)
        exec(compile(solution, "<solution of " + label + ">", "exec"), scope)
        answer = scope["answer"]
        record["accepted"], record["accepted_message"] = run(answer)
        ok, record["rejected_message"] = run(wrong(answer))
        record["rejected"] = not ok
        inputs = getattr(check, "inputs", None)
        key = (np.concatenate([flat(answer(*args)) for args in inputs]) if callable(answer) and inputs
               else flat(answer))
        record["revealed"] = revealed(key, record["rejected_message"], shift)
        record["digits"] = digits = getattr(check, "digits", None)
        if digits:  # the precision the statement asks: rounded to it passes, 1.5 units off fails
            record["precision_accepted"], record["precision_accepted_message"] = run(
                at_precision(answer, digits, 0.0))
            ok, record["precision_rejected_message"] = run(at_precision(answer, digits, 1.5))
            record["precision_rejected"] = not ok
    except Exception as exc:  # reported by the test, with the chapter and the label
        record["error"] = type(exc).__name__ + ": " + str(exc)
    finally:
        for k, state in generators.items():
            space[k].set_state(state)
        torch.set_rng_state(states[0]); np.random.set_state(states[1]); random.setstate(states[2])
    print(%(mark)r + json.dumps(record))
"""


def registry_call(source: str) -> tuple[str, str] | None:
    """(label, call source) of an ``answer_check("label", answer, ...)`` call in ``source``, or None."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "answer_check"
            and len(node.args) == 2
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and isinstance(node.args[1], ast.Name)
            and node.args[1].id == "answer"
        ):
            return node.args[0].value, ast.get_source_segment(source, node)
    return None


def check_name(cell) -> str | None:
    """The check a cell calls: ``check_<label>`` (a key cell's check) or the label of
    ``answer_check("label", answer, ...)`` (a key of the registry ``softlin.book.exercises``)."""
    found = registry_call(cell.source)
    if found:
        return found[0]
    m = CHECK_CALL.search(cell.source)
    return m.group(1) if m else None


def solutions(nb) -> dict[str, str]:
    """{exercise label: code of the last ``python`` block of its ``{solution}``} ('' when it has none)."""
    out = {}
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for m in SOLUTION.finditer(cell.source):
                blocks = PYTHON_BLOCK.findall(m.group("body"))
                out[m.group("label")] = blocks[-1][1] if blocks else ""
    return out


def label_of(name: str, labels) -> str | None:
    """The exercise label whose check is called ``name`` (``check_`` + the label, ``-`` -> ``_``)."""
    for label in labels:
        if "check_" + label.replace("-", "_") == name:
            return label
    return None


def exercise_labels(nb) -> list[str]:
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    return re.findall(
        r"^`{3,}\{exercise\}[^\n]*\n(?::[a-z-]+:[^\n]*\n)*?:label:\s*(\S+)", text, re.MULTILINE
    )


def inject(nb) -> int:
    """Insert a harness cell after every ``exercise-check`` cell of ``nb`` (in place); return how many."""
    sols = solutions(nb)
    cells, n = [], 0
    for cell in nb.cells:
        cells.append(cell)
        if cell.cell_type != "code" or TAG_CHECK not in cell.metadata.get("tags", []):
            continue
        name = check_name(cell)
        found = registry_call(cell.source)
        label = found[0] if found else label_of(name, sols) if name else None
        if found and label in sols and sols[label].strip():
            setup = (  # the check call, as a function of the answer
                "from softlin.book.exercises import key_of as _softlin_key_of\n"
                f"_softlin_check = lambda answer: {found[1]}\n"
                f"_softlin_check.inputs = _softlin_key_of({label!r}).inputs\n"
                f"_softlin_check.digits = _softlin_key_of({label!r}).digits\n"
            )
            code = (
                HARNESS
                % {"shift": RELATIVE_ERROR, "mark": MARK}
                + f"\n{setup}_softlin_try_exercise(_softlin_check, {sols[label]!r}, {label!r})\n"
                "del _softlin_try_exercise, _softlin_check, _softlin_key_of\n"
            )
        elif name is None:
            code = f"print({MARK!r} + {json.dumps(json.dumps({'label': None, 'error': 'the exercise-check cell calls no check_...(answer)'}))})"
        elif label is None or not sols.get(label, "").strip():
            err = f"no {{solution}} with a python block for {name} (its label with - for _)"
            code = f"print({MARK!r} + {json.dumps(json.dumps({'label': name, 'error': err}))})"
        else:
            code = (
                HARNESS % {"shift": RELATIVE_ERROR, "mark": MARK}
                + f"\n_softlin_try_exercise({name}, {sols[label]!r}, {label!r})\ndel _softlin_try_exercise\n"
            )
        cells.append(
            nbformat.v4.new_code_cell(code, metadata={"tags": ["remove-cell", TAG_HARNESS]})
        )
        n += 1
    nb.cells = cells
    return n


def collect(nb) -> list[dict]:
    """The records printed by the harness cells of an executed notebook, in order."""
    records = []
    for cell in nb.cells:
        if cell.cell_type == "code" and TAG_HARNESS in cell.metadata.get("tags", []):
            text = "".join(
                o.get("text", "")
                for o in cell.get("outputs", [])
                if o.get("output_type") == "stream"
            )
            found = [
                json.loads(line[len(MARK) :]) for line in text.splitlines() if line.startswith(MARK)
            ]
            records.extend(
                found
                or [{"label": None, "error": "the harness cell printed nothing (did it run?)"}]
            )
    return records
