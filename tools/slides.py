#!/usr/bin/env python
"""Slide decks of the lessons, built from the executed lessons themselves (reveal.js, offline).

    python tools/slides.py                          # every lesson's deck into the built site's slides/
    python tools/slides.py --only 03_concentration  # one deck
    python tools/slides.py --check                  # resolve every outline, write nothing

``tools/build_book.py`` runs it after the site is built. A lesson's deck is described by a short outline,
``book/slides/NN_name.yml``, which names what goes on each slide by stable references into the lesson
rather than by copying it: a ``prf`` block by its label, a figure by its label, the lines its check
printed, exercises by their labels, a section (``Summary``) by its heading, and the instructor's own short
text and presenter notes. Every referenced item is read from the EXECUTED lesson
(``<stage>/book/NN_name.ipynb``, written by ``tools/build_book.py``), so a slide's figure is the PNG the
lesson drew and its numbers are the ones the lesson printed in that build. A label, heading or check the
lesson does not have stops the build, naming the outline, the slide and what the lesson does have.

The deck is one HTML file, ``<site>/slides/NN_name.html``, with its figures in ``<site>/slides/NN_name/``.
It loads reveal.js and MathJax from the site's own ``_static/`` (``tools/fetch_vendor.py``; no CDN), with
the book's MathJax configuration (``_config.yml``), so it opens offline from a copy of the site. The
slides are 1280 x 720; ``?print-pdf`` after the file name gives reveal.js's print view (one slide a
page: print to PDF from the browser, or ``tests/test_kit_slides.py``'s headless Chromium). ``s`` opens
the speaker view with the presenter notes.

Outline format (YAML)::

    lesson: 01_measure_view            # optional; must be the outline's file name
    slides:
      - title: Softmax attention is a tilted mean   # the slide's heading (optional)
        text: |                                     # a few lines in the instructor's words (MyST: $math$)
          ...
        prf: prop-tilted-mean                       # one label or a list
        figure: fig-ch1-tilt                        # one label (the figure's PNG, caption below)
        caption: Marker area is the weight.         # optional: the short caption
        check: "tilted mean"                        # lines printed by a check that start with this (or a
                                                    # list of such starts), or `auto`: the lines of the
                                                    # one visible check_* cell; in the notes
        exercises: [ex-ch1-one-token]               # one label or a list: title and statement
        section: Summary                            # the markdown of a `## ` section of the lesson
        notes: |                                    # presenter notes (speaker view only)
          ...
        home: true                                  # optional: the 90-minute plan steps past this
                                                    # slide (students read it in the lesson); said
                                                    # first in its notes

The items of a slide are drawn in the order they are written; ``notes`` are never drawn, and a
``check``'s printed lines join the notes ("What the lesson measured"): a lecture slide holds a
statement and a few bullets, and the lecturer quotes the numbers where they help.

**Figures for a lecture hall.** A figure fills the height its slide leaves (up to the
full width), so its slide shows a short caption: "Figure N.M." and the first sentence of
the lesson's caption, or the slide's own ``caption`` where that sentence does not serve
(with only numbers the lesson's caption has). The whole caption opens the slide's
presenter notes. The figure appears on a
key press, once the room has predicted it. Until then the slide shows the question its notes
ask ("Ask for a prediction before the next key press shows the figure: ...?"), for a room that sees
no notes. The figure is the lesson's 2x PNG,
laid out at the size the lesson shows it at: sharp on a projector.

**Numbers the lesson printed, in any text.** In ``title``, ``text``, ``notes`` and an exercise's ``text``,
the role ``{printed}`C_soft = ``` becomes the first number of the line the lesson printed that starts
with ``C_soft = `` (``20.30``), and ``{printed}`C_soft = ... r* = ``` the first number after ``r* = `` on
that line: an outline states no number of its own that a rerun of the lesson could change.

**Exercises for a lecture room.** An exercise's statement often speaks to the notebook (``tokens[0]``,
"check it below"). An entry of ``exercises`` may then be a mapping, ``{label: ex-ch1-one-token, text:
...}``: the slide shows the lesson's title and this text, the statement as the room reads it. The build
refuses an exercise slide that would show code (an inline code span: a notebook's name), and an override
text with a number the lesson's statement does not have (numbers come from the lesson, or from
``{printed}``). Every exercise slide has presenter notes (``tests/test_kit_slides.py``): what to ask, what
the answer looks like, how long to give. An exercise is named as the lesson's page and
the instructor plan name it, "Exercise 2.1: The limit for a Gaussian mixture": from the
lesson's number and the exercise's place among the lesson's numbered exercises.
"""

from __future__ import annotations

import argparse
import base64
import codecs
import html
import json
import re
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_book import ROOT, chapter_title, lessons

OUTLINES = ROOT / "book" / "slides"
ITEMS = tuple("title text prf figure caption check exercises section notes home".split())
MAX_CHECK_LINES = 6  # the notes show at most this many printed lines of a check
FIT_FLOOR = 70  # percent: the smallest type a slide is shrunk to so that it fits its frame
MIN_FIGURE = 300  # pixels: the smallest height a figure is shrunk to, to leave room
FIGURE_ROOM = 700  # pixels: a figure grows until its slide is this high
TEXT_GROW = 130  # percent: the largest type a slide without a figure is drawn in
TEXT_ROOM = 600  # pixels: a slide without a figure grows its type while it stays this high
ABBREVIATIONS = ("e.g", "i.e", "cf", "vs", "etc", "al", "Fig", "Eq", "resp", "approx")
CHECK_CALL = re.compile(r"\bcheck_(close|below|above|true)\s*\(")
HIDDEN_TAGS = {"remove-cell", "remove-input", "hide-input", "hide-cell"}
DIRECTIVE_OPEN = re.compile(r"^(?P<fence>`{3,}|:{3,})\{(?P<name>[\w:-]+)\}[ \t]*(?P<arg>.*)$")
OPTION = re.compile(r"^:(?P<key>[\w-]+):[ \t]*(?P<value>.*)$")
ROLE = re.compile(r"\{(?P<role>[\w:-]+)\}`(?P<body>[^`]*)`")
TARGET = re.compile(r"^\((?P<label>[\w-]+)\)=\s*$", re.MULTILINE)
SECTION_TARGET = re.compile(
    r"^\((?P<label>[\w-]+)\)=[ \t]*\n(?:[ \t]*\n)*#+[ \t]+(?P<title>.+?)[ \t]*$", re.M
)


class OutlineError(Exception):
    """An outline names something its lesson does not have (or is malformed)."""


# --------------------------------------------------------------------------------------------------
# what an executed lesson holds, found by label


@dataclass
class Block:
    """A MyST directive block of a markdown cell: ``{prf:lemma} Title`` with ``:label:``, its body."""

    name: str  # "prf:lemma", "exercise", ...
    title: str
    options: dict
    body: str


@dataclass
class Lesson:
    stem: str
    number: int
    title: str
    mode: str
    blocks: dict = field(default_factory=dict)  # label -> Block
    figures: dict = field(default_factory=dict)  # label -> (png bytes, caption, alt, number)
    # label -> (width, height) at which the lesson shows the figure: a high-resolution
    # PNG has more pixels (twice as many in each direction) than that logical size
    figure_sizes: dict = field(default_factory=dict)
    # label -> the exercise's number in its lesson (as sphinx-exercise numbers them:
    # 1, 2, ... in reading order)
    exercise_numbers: dict = field(default_factory=dict)
    prints: list = field(default_factory=list)  # (line, cell is visible, cell calls a check)
    markdown: list = field(default_factory=list)  # the markdown cells' sources, in order


def directive_blocks(text: str) -> list[Block]:
    """Every directive block of a MyST markdown text, outer blocks first (nested ones are read too)."""
    lines, out, i = text.splitlines(), [], 0
    while i < len(lines):
        m = DIRECTIVE_OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        fence = m.group("fence")
        closing = re.compile(rf"^{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        j, options = i + 1, {}
        while j < len(lines) and OPTION.match(lines[j]):
            o = OPTION.match(lines[j])
            options[o.group("key")] = o.group("value").strip()
            j += 1
        k = j
        while k < len(lines) and not closing.match(lines[k]):
            k += 1
        body = "\n".join(lines[j:k]).strip("\n")
        out.append(Block(m.group("name"), m.group("arg").strip(), options, body))
        out.extend(directive_blocks(body))
        i = k + 1
    return out


def read_lesson(ipynb: Path, number: int) -> Lesson:
    nb = json.loads(ipynb.read_text())
    params = nb.get("metadata", {}).get("papermill", {}).get("parameters", {})
    lesson = Lesson(ipynb.stem, number, ipynb.stem, str(params.get("mode", "?")))
    n_fig = 0
    for cell in nb["cells"]:
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] == "markdown":
            lesson.markdown.append(source)
            if lesson.title == ipynb.stem:
                m = re.search(r"^# (.+)$", source, re.MULTILINE)
                if m:
                    lesson.title = m.group(1).strip()
            for block in directive_blocks(source):
                if "label" in block.options:
                    lesson.blocks[block.options["label"]] = block
                if block.name == "exercise" and "nonumber" not in block.options:
                    k = len(lesson.exercise_numbers) + 1
                    lesson.exercise_numbers[block.options.get("label", f"#{k}")] = k
            continue
        if cell["cell_type"] != "code":
            continue
        meta = cell.get("metadata", {})
        tags = set(meta.get("tags", []))
        figure = meta.get("mystnb", {}).get("figure")
        if figure and figure.get("name"):
            n_fig += 1
            outs = cell.get("outputs", [])
            pngs = [o for o in outs if "image/png" in o.get("data", {})]
            png = None
            if pngs:
                png = base64.b64decode("".join(pngs[-1]["data"]["image/png"]))
            alt = meta.get("mystnb", {}).get("image", {}).get("alt", "")
            lesson.figures[figure["name"]] = (png, figure.get("caption", ""), alt, n_fig)
            if png is not None:
                shown = pngs[-1].get("metadata", {}).get("image/png", {})
                lesson.figure_sizes[figure["name"]] = logical_size(png, shown)
        visible = not (tags & HIDDEN_TAGS)
        calls = bool(CHECK_CALL.search(source))
        for o in cell.get("outputs", []):
            if o.get("output_type") == "stream" and o.get("name") == "stdout":
                text = "".join(o["text"]) if isinstance(o["text"], list) else o["text"]
                lesson.prints += [(line, visible, calls) for line in text.splitlines() if line]
    return lesson


# --------------------------------------------------------------------------------------------------
# MyST text to HTML (math left for MathJax)


def _math(content: str, display: bool) -> str:
    content = html.escape(content.strip(), quote=False)
    return f"\\[{content}\\]" if display else f"\\({content}\\)"


def markdown_renderer():
    from markdown_it import MarkdownIt
    from mdit_py_plugins.amsmath import amsmath_plugin
    from mdit_py_plugins.dollarmath import dollarmath_plugin

    md = (
        MarkdownIt("commonmark", {"html": False})
        .enable("table")
        .use(dollarmath_plugin, renderer=lambda c, o: _math(c, o.get("display_mode", False)))
        .use(amsmath_plugin, renderer=lambda c: _math(c, True))
    )
    default_fence = md.renderer.rules["fence"]

    def fence(tokens, idx, options, env):
        token = tokens[idx]
        info = token.info.strip()
        m = re.match(r"^\{([\w:-]+)\}\s*(.*)$", info)
        if not m:
            return default_fence(tokens, idx, options, env)
        name, arg = m.groups()
        body = "\n".join(ln for ln in token.content.splitlines() if not OPTION.match(ln))
        if name == "math":
            return f'<div class="math">{_math(body, True)}</div>\n'
        if name in ("code-block", "code", "code-cell"):
            return f"<pre><code>{html.escape(body)}</code></pre>\n"
        title = f'<p class="block-title">{md.renderInline(arg)}</p>' if arg else ""
        return f'<div class="block {html.escape(name)}">{title}{md.render(body)}</div>\n'

    md.renderer.rules["fence"] = fence
    return md


@cache
def section_titles() -> dict[str, str]:
    """Every section target of the book's pages (lessons, labs, appendix): ``label -> heading``, so that a
    slide shows ``{ref}`ch5-transfer``` as the section's title, as the site does, not as its label."""
    out = {}
    for md in sorted((ROOT / "book").rglob("*.md")):
        for m in SECTION_TARGET.finditer(md.read_text(encoding="utf-8")):
            out.setdefault(m.group("label"), m.group("title"))
    return out


@cache
def bibliography() -> dict[str, tuple[list[str], str]]:
    """book/references.bib's entries: key -> (the authors' last names in plain text, year).

    pybtex parses the file (it ships with sphinxcontrib-bibtex, which renders the book's citations)
    and latexcodec turns BibTeX's accents into Unicode: ``Peyr{\\'e}`` -> ``Peyré``."""
    import latexcodec  # noqa: F401  (registers the "ulatex" codec)
    from pybtex.database import parse_file

    def plain(tex: str) -> str:
        return codecs.decode(tex, "ulatex").replace("{", "").replace("}", "").strip()

    out = {}
    for key, entry in parse_file(ROOT / "book" / "references.bib", "bibtex").entries.items():
        people, year = entry.persons.get("author", []), entry.fields.get("year", "")
        if people and year:
            out[key] = ([plain(" ".join(p.prelast_names + p.last_names)) for p in people], year)
    return out


def citation(role: str, body: str) -> str:
    """A ``{cite}`` role's keys as author and year: "(Bohbot et al., 2025)"; ``{cite:t}``: "Bohbot et al.
    (2025)". Two authors are both named ("Boursier and Boyer"), three or more are "First et al."."""
    bib, parts = bibliography(), []
    for key in (k.strip() for k in body.split(",")):
        if key not in bib:
            raise OutlineError(f"{{cite}}`{key}`: no such key in book/references.bib")
        names, year = bib[key]
        who = " and ".join(names) if len(names) <= 2 else f"{names[0]} et al."
        parts.append(f"{who} ({year})" if role == "cite:t" else f"{who}, {year}")
    return "; ".join(parts) if role == "cite:t" else f"({'; '.join(parts)})"


class Renderer:
    """MyST markdown of one lesson to HTML: roles become their text, targets vanish."""

    def __init__(self, lesson: Lesson):
        self.lesson = lesson
        self.md = markdown_renderer()

    def role(self, m: re.Match) -> str:
        role, body = m.group("role"), m.group("body")
        explicit = re.match(r"^(?P<text>.*?)\s*<(?P<target>[^>]+)>$", body, re.DOTALL)
        if role == "math":
            return f"${body}$"
        if role == "printed":
            return printed_number(self.lesson, body)
        if explicit:
            return explicit.group("text").replace("%s", "").strip()
        if role in ("prf:ref", "ref") and body in self.lesson.blocks:
            return self.lesson.blocks[body].title or body
        if role == "ref" and body in section_titles():
            return section_titles()[body]
        if role == "numref" and body in self.lesson.figures:
            return f"Figure {self.lesson.number}.{self.lesson.figures[body][3]}"
        if role.startswith("cite"):
            return citation(role, body)
        page = ROOT / "book" / f"{body.removeprefix('../')}.md"
        if role == "doc" and page.exists():
            return chapter_title(page)
        return body

    def text(self, source: str) -> str:
        return ROLE.sub(self.role, TARGET.sub("", source))

    def block(self, source: str) -> str:
        return keep_punctuation(self.md.render(self.text(source)))

    def inline(self, source: str) -> str:
        return keep_punctuation(self.md.renderInline(self.text(source)))


#: Inline math with the bracket right before it and the punctuation right after it: kept on one line,
#: so that a line never starts with the ":" or "?" that ends a formula, nor ends on the "(" that opens it.
MATH_THEN_PUNCTUATION = re.compile(
    r'([(\[]?)((?:<span class="math inline">)?\\\((?:(?!\\\)).)*?\\\)(?:</span>)?)([.,;:?!)\]]*)',
    re.S,
)


#: A number with an exponent (5.715e-11): the line may not break at its "-".
EXPONENT_NUMBER = re.compile(r"[-+]?\d[\d.]*e[-+]\d+")


def unbroken_numbers(escaped: str) -> str:
    return EXPONENT_NUMBER.sub(lambda m: f'<span class="nobr">{m[0]}</span>', escaped)


def keep_punctuation(rendered: str) -> str:
    def nobr(m: re.Match) -> str:
        return f'<span class="nobr">{m[0]}</span>' if m[1] or m[3] else m[0]

    return MATH_THEN_PUNCTUATION.sub(nobr, rendered)


# --------------------------------------------------------------------------------------------------
# an outline's slides


def as_list(value) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def numbers_in(text: str) -> set[str]:
    """The numbers a text writes (a sentence's full stop is not a decimal point)."""
    return {x.rstrip(".") for x in NUMBER.findall(text)}


def printed_number(lesson: Lesson, spec: str) -> str:
    """The number a ``{printed}`start ... after``` role stands for: the first number, after ``after``
    when it is given, of the first line the lesson printed that starts with ``start``."""
    start, _, after = (part.strip() for part in spec.partition("..."))
    for line, _, _ in lesson.prints:
        if not line.startswith(start):
            continue
        rest = line[len(start) :]
        if after:
            i = rest.find(after)
            if i < 0:
                continue
            rest = rest[i + len(after) :]
        m = NUMBER.search(rest)
        if m:
            return m.group(0).lstrip("+")
    starts = sorted({line.split("=")[0][:40] for line, _, _ in lesson.prints})
    raise OutlineError(
        f"{{printed}}`{spec}`: {lesson.stem} printed no line that starts with {start!r}"
        + (f" and has a number after {after!r}" if after else " and has a number")
        + f"; its printed lines start with {starts}"
    )


def check_lines(lesson: Lesson, spec, where: str) -> list[str]:
    """The verdict lines a slide shows: those printed that start with ``spec`` (or with one of a list of
    starts, in the list's order), or with ``auto`` those printed by the cells that call a check (the
    visible ones where there are any: a lesson may fold its check's code and show its verdict)."""
    if isinstance(spec, list):
        found = [line for one in spec for line in check_lines(lesson, str(one), where)]
        if len(found) > MAX_CHECK_LINES:
            raise OutlineError(
                f"{where}: {len(found)} lines match {spec!r} (at most {MAX_CHECK_LINES} fit the notes)"
            )
        return found
    if spec == "auto":  # the check's verdict, from a visible cell first, else a folded one
        found = [line for line, visible, calls in lesson.prints if visible and calls] or [
            line for line, _, calls in lesson.prints if calls
        ]
        if not found:
            raise OutlineError(f"{where}: `check: auto` found no cell that calls check_*")
    else:
        found = [line for line, _, _ in lesson.prints if line.startswith(str(spec))]
        if not found:
            starts = sorted({line.split(":")[0][:50] for line, _, calls in lesson.prints if calls})
            raise OutlineError(
                f"{where}: no printed line starts with {spec!r}; lines printed by checks start with "
                f"{starts}"
            )
    if len(found) > MAX_CHECK_LINES:
        raise OutlineError(
            f"{where}: {len(found)} lines match {spec!r} (at most {MAX_CHECK_LINES} fit the notes): "
            f"{found[:6]}"
        )
    return found


def labelled(lesson: Lesson, label: str, kinds: tuple[str, ...], where: str) -> Block:
    block = lesson.blocks.get(label)
    if block is None or not block.name.startswith(kinds):
        have = sorted(k for k, b in lesson.blocks.items() if b.name.startswith(kinds))
        raise OutlineError(
            f"{where}: {lesson.stem} has no {'/'.join(kinds)} block {label!r}; it has {have}"
        )
    return block


def section_markdown(lesson: Lesson, heading: str, where: str) -> str:
    """The markdown under ``## heading`` up to the next heading of level 1 or 2."""
    text = "\n\n".join(lesson.markdown)
    m = re.search(
        rf"^## {re.escape(heading)}[ \t]*$(?P<body>.*?)(?=^#{{1,2}} |\Z)", text, re.S | re.M
    )
    if not m:
        have = re.findall(r"^## (.+)$", text, re.MULTILINE)
        raise OutlineError(f"{where}: {lesson.stem} has no section '## {heading}'; it has {have}")
    return m.group("body").strip()


INLINE_CODE = re.compile(r"(?<![`{}])`(?P<code>[^`\n]+)`")


def exercise_statement(lesson: Lesson, entry, where: str) -> tuple[str, str]:
    """The label of an ``exercises`` entry and the statement its slide shows: the lesson's, or the
    entry's own ``text`` (the statement as a lecture room reads it). A statement that would show code
    (the notebook's names) is refused, and so is an override with a number the lesson's statement does
    not have: numbers come from the lesson (its statement, or ``{printed}``)."""
    if isinstance(entry, dict):
        if set(entry) - {"label", "text"} or "label" not in entry:
            raise OutlineError(
                f"{where}: an exercise is a label or a mapping with `label` and `text`, got {entry!r}"
            )
        label, override = str(entry["label"]), entry.get("text")
    else:
        label, override = str(entry), None
    body = labelled(lesson, label, ("exercise",), where).body
    shown = body if override is None else str(override)
    code = [m.group("code") for m in INLINE_CODE.finditer(ROLE.sub("", shown))]
    if code:
        raise OutlineError(
            f"{where}: exercise {label!r} would show the notebook's names {code} in a lecture room: "
            f"give the slide its own wording, `- {{label: {label}, text: ...}}`"
        )
    if override is not None:
        have = set(NUMBER.findall(ROLE.sub("", body)))
        new = sorted(set(NUMBER.findall(ROLE.sub("", shown))) - have)
        if new:
            raise OutlineError(
                f"{where}: the slide's text of exercise {label!r} has numbers its statement in "
                f"{lesson.stem} does not have: {new} (take them from the lesson: {{printed}}`...`)"
            )
    return label, shown


def exercise_name(lesson: Lesson, label: str) -> str:
    """An exercise's name as the site (sphinx-exercise) and the instructor plan give it:
    "Exercise 2.1" for the first numbered exercise of lesson 2, from the lesson's number
    and the exercise's place among the lesson's numbered exercises (a ``:nonumber:`` one
    is plain "Exercise")."""
    n = lesson.exercise_numbers.get(label)
    return "Exercise" if n is None else f"Exercise {lesson.number}.{n}"


def first_sentence(caption: str) -> str:
    """The first sentence of a MyST caption: up to the first ``.``, ``!`` or ``?`` that
    a space (or the end) follows, outside math, roles and brackets, and not after an
    abbreviation (``e.g.``)."""
    depth, i, n = 0, 0, len(caption)
    while i < n:
        c = caption[i]
        if c == "$":  # $...$ or $$...$$: skipped whole
            fence = "$$" if caption.startswith("$$", i) else "$"
            end = caption.find(fence, i + len(fence))
            i = n if end < 0 else end + len(fence)
            continue
        if c == "`":  # a role's body
            end = caption.find("`", i + 1)
            i = n if end < 0 else end + 1
            continue
        depth += (c in "([{") - (c in ")]}")
        if c in ".!?" and depth <= 0 and (i + 1 == n or caption[i + 1].isspace()):
            word = re.search(r"[\w.]*$", caption[:i]).group(0)
            if word.rstrip(".") not in ABBREVIATIONS:
                return caption[: i + 1]
        i += 1
    return caption


def png_size(png: bytes) -> tuple[int, int]:
    """Width and height in pixels of a PNG (its IHDR chunk), so that a deck scales a figure to the room
    its slide leaves before the image has loaded."""
    if png[:8] != b"\x89PNG\r\n\x1a\n" or png[12:16] != b"IHDR":
        raise OutlineError("a figure's output is not a PNG")
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def logical_size(png: bytes, shown: dict) -> tuple[int, int]:
    """The size at which a lesson shows a PNG figure: the ``width`` (and ``height``) of
    its output's metadata, where IPython's ``retina`` format puts the logical size of a
    2x PNG; else its pixels. Without ``height`` (tools/build_book.py drops it), the
    height follows from the width and the PNG's shape."""
    w, h = png_size(png)
    try:
        width = float(shown.get("width", w))
        height = float(shown.get("height", h * width / w))
    except (TypeError, ValueError):
        return w, h
    return round(width), round(height)


def render_slide(lesson: Lesson, r: Renderer, slide: dict, index: int, assets: Path, rel: str):
    """The ``<section>`` of one slide, and the figure files it needs ({name: bytes})."""
    where = f"book/slides/{lesson.stem}.yml, slide {index}"
    if not isinstance(slide, dict):
        raise OutlineError(f"{where}: a slide is a mapping of items, got {slide!r}")
    unknown = set(slide) - set(ITEMS)
    if unknown:
        raise OutlineError(f"{where}: unknown items {sorted(unknown)}; known: {list(ITEMS)}")
    try:
        return _render_slide(lesson, r, slide, where, rel)
    except OutlineError as exc:
        if str(exc).startswith(where):
            raise
        raise OutlineError(f"{where}: {exc}") from None


def _render_slide(lesson: Lesson, r: Renderer, slide: dict, where: str, rel: str):
    parts, files, classes, extra_notes, lead_notes = [], {}, [], [], []
    if "caption" in slide and "figure" not in slide:
        raise OutlineError(f"{where}: `caption` is the short caption of a `figure`")
    if "home" in slide:
        if slide["home"] is not True:
            raise OutlineError(f"{where}: `home` is `true` or left out, got {slide['home']!r}")
        lead_notes.append(
            f"**Home reading in the 90-minute plan.** The run sheet steps past this slide: students "
            f"read it in lesson {lesson.number}. Show it if the session runs ahead."
        )
    # On a figure slide the figure is a fragment (it appears on a key press, once the
    # room has predicted it), with reveal.js's fragment index 0.
    index = ' data-fragment-index="0"'
    figure_attrs = f' class="fragment"{index}'
    for key, value in slide.items():
        if key == "title":
            parts.append(f"<h2>{r.inline(str(value))}</h2>")
        elif key == "text":
            parts.append(f'<div class="text">{r.block(str(value))}</div>')
        elif key == "prf":
            for label in as_list(value):
                b = labelled(lesson, label, ("prf:",), where)
                kind = b.name.split(":", 1)[1].capitalize()
                title = b.title
                parts.append(
                    f'<div class="prf {html.escape(b.name.replace(":", "-"))}" data-label="{label}">'
                    f'<p class="prf-title"><span class="prf-kind">{kind}</span> {r.inline(title)}</p>'
                    f"{r.block(b.body)}</div>"
                )
        elif key == "figure":
            label = str(value)
            if label not in lesson.figures:
                raise OutlineError(
                    f"{where}: {lesson.stem} has no figure {label!r}; it has {sorted(lesson.figures)}"
                )
            png, caption, alt, n = lesson.figures[label]
            if png is None:
                raise OutlineError(
                    f"{where}: figure {label!r} has no PNG output in the executed lesson"
                )
            files[f"{label}.png"] = png
            # the size the lesson shows it at (its shape, for the deck's layout); the
            # deck draws it at the height its slide leaves, from the PNG's pixels (twice
            # that size in each direction: sharp on a projector)
            w, h = lesson.figure_sizes.get(label) or png_size(png)
            classes.append("has-figure")
            caption = " ".join(caption.split())
            number = f"Figure {lesson.number}.{n}."
            # the whole caption opens the notes; the slide shows a short one, so
            # that the figure has the room
            lead_notes.append(f"**{number}** {caption}")
            short = first_sentence(caption)
            if "caption" in slide:
                short = " ".join(str(slide["caption"]).split())
                new = sorted(numbers_in(ROLE.sub("", short)) - numbers_in(caption))
                if new:
                    raise OutlineError(
                        f"{where}: the short caption has numbers the caption of "
                        f"{label!r} does not have: {new}"
                    )
            parts.append(
                # a fragment: the figure appears on the next key press, once the room has predicted
                # it (the notes ask for that); it takes its room from the start, and prints shown
                f'<figure{figure_attrs} data-label="{label}">'
                f'<img src="{rel}/{label}.png" '
                f'data-width="{w}" data-height="{h}" '
                f'alt="{html.escape(alt, quote=True)}"><figcaption><span class="fig-number">'
                f"{number}</span> {r.inline(short)}</figcaption></figure>"
            )
        elif key == "check":
            # what the lesson's check printed goes to the presenter notes, not the slide: a
            # lecture slide holds a statement and a few bullets, and the lecturer quotes the
            # numbers where they help (they would also give a figure's answer away)
            lines = check_lines(lesson, value if isinstance(value, list) else str(value), where)
            gloss = " SE: a standard error." if any(" SE " in x for x in lines) else ""
            extra_notes.append(
                f"**What the lesson measured** ({lesson.mode} mode).{gloss}\n\n```text\n"
                + "\n".join(lines)
                + "\n```"
            )
        elif key == "exercises":
            for entry in as_list(value):
                label, shown = exercise_statement(lesson, entry, where)
                b = lesson.blocks[label]
                kind = " (conceptual)" if "conceptual" in b.options.get("class", "") else ""
                parts.append(
                    f'<div class="exercise" data-label="{label}">'
                    '<p class="exercise-title">'
                    f"{exercise_name(lesson, label)}: {r.inline(b.title)}{kind}</p>"
                    f"{r.block(shown)}</div>"
                )
        elif key == "section":
            parts.append(
                f'<div class="section">{r.block(section_markdown(lesson, str(value), where))}</div>'
            )
        elif key in ("notes", "caption", "home"):
            continue
    if not parts:
        raise OutlineError(
            f"{where}: the slide shows nothing (give a title, text, prf, figure, ...)"
        )
    own = [str(slide["notes"])] if "notes" in slide else []
    notes = "\n\n".join(lead_notes + own + extra_notes)
    if notes:
        parts.append(f'<aside class="notes">{r.block(notes)}</aside>')
    question = prediction_question(slide)
    if question is not None:
        # the room reads the question while the figure is hidden (a mirrored projector shows no
        # notes); it goes once the figure shows, and is not printed
        classes.append("has-predict")
        parts.insert(
            1 if "title" in slide else 0,
            f'<p class="predict"><strong>Predict:</strong> {r.inline(question)}'
            '<span class="predict-cue">the figure comes on the next key (&#8594;)</span></p>',
        )
    cls = f' class="{" ".join(classes)}"' if classes else ""
    return f"<section{cls}>\n" + "\n".join(parts) + "\n</section>", files


PREDICT = re.compile(
    r"Ask for a prediction before the next key press shows the figure:\s*(?P<q>.+?\?)(?=\s|$)", re.S
)


def prediction_question(slide: dict) -> str | None:
    """The question a figure slide's notes ask the room before the figure shows ("Ask for a prediction
    before the next key press shows the figure: ...?"), up to its first question mark; None on a slide
    with no figure, with no such question, or whose own ``text`` comes before the figure (it asks the
    question itself)."""
    if "figure" not in slide:
        return None
    keys = list(slide)
    if "text" in keys and keys.index("text") < keys.index("figure"):
        return None
    found = PREDICT.search(str(slide.get("notes", "")))
    return " ".join(found["q"].split()) if found else None


# --------------------------------------------------------------------------------------------------
# the deck


def mathjax_config() -> dict:
    """The site's MathJax configuration (``_config.yml``), with Sphinx's own delimiters and classes."""
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    mj = dict(cfg["sphinx"]["config"].get("mathjax3_config", {}))
    tex = dict(mj.get("tex", {}))
    tex.update(inlineMath=[["\\(", "\\)"]], displayMath=[["\\[", "\\]"]], processEscapes=True)
    mj["tex"] = tex
    mj["options"] = {"ignoreHtmlClass": "tex2jax_ignore", "processHtmlClass": "math"}
    return mj


PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}: slides</title>
<link rel="stylesheet" href="../_static/revealjs/reveal.css">
<link rel="stylesheet" href="../_static/revealjs/theme/white.css">
<link rel="stylesheet" href="slides.css">
<script>
window.MathJax = {mathjax};
window.MathJax.startup = {{
  pageReady: () => MathJax.startup.defaultPageReady().then(() => document.fonts.ready).then(startDeck)
}};
// Run once the fonts and the formulas are in (they set the heights). A slide's figure
// fills the height the rest of its slide leaves (the full width at most), so that its
// legend reads from the back of a room: the rest is measured with the figure at zero
// height, and the slide ends {figure_room} px down, clear of reveal.js's slide number.
// A slide taller or wider (a long display formula) than its frame, or whose figure
// would be under {min_figure} px high, is drawn in smaller type, down to {floor} %,
// before reveal.js lays out the deck (and its print view); one that still does not
// fit is left as it is (tests/test_kit_slides.py reports it).
function fitSlide(s) {{
  const img = s.querySelector('figure img[data-width]');
  const w = img ? +img.dataset.width : 1, h = img ? +img.dataset.height : 1;
  const size = (height) => {{
    img.style.cssText = 'display: block; margin: 0 auto; max-width: none; '
      + `max-height: none; height: ${{height}}px; width: ${{height * w / h}}px`;
  }};
  const over = () => s.scrollHeight > 712 || s.scrollWidth > s.clientWidth + 1;
  for (let font = 100; ; font -= 5) {{
    if (font < 100) {{ s.style.fontSize = font + '%'; s.dataset.fitted = font; }}
    const last = font - 5 < {floor};
    if (!img) {{
      if (font === 100 && !over()) return grow(s);
      if (!over() || last) return;
      continue;
    }}
    size(0);
    const full = img.parentElement.clientWidth * h / w;
    const height = Math.min({figure_room} - s.scrollHeight, full);
    if ((height >= {min_figure} && !over()) || last) {{
      return size(Math.max(height, {min_figure}));
    }}
  }}
}}
// A slide of text alone (a statement, a question) that fits at 100 % is drawn in larger
// type, up to {grow} %, while it stays {text_room} px high: it fills the frame and reads
// from the back of a room. The title slide keeps its type.
// Every element must end inside the slide's padding (a wide display formula can spill
// out of its box without widening the slide).
function wide(s) {{
  const left = s.getBoundingClientRect().left, edge = s.clientWidth - 24;
  return [...s.querySelectorAll('*')].some(e => e.getBoundingClientRect().right - left > edge);
}}
function grow(s) {{
  if (s.classList.contains('title-slide')) return;
  for (let font = 105; font <= {grow}; font += 5) {{
    s.style.fontSize = font + '%';
    if (s.scrollHeight > {text_room} || wide(s)) {{
      font -= 5;
      s.style.fontSize = font === 100 ? '' : font + '%';
      break;
    }}
    s.dataset.fitted = font;
  }}
  if (!s.style.fontSize) delete s.dataset.fitted;
}}
function fitSlides() {{
  const box = document.querySelector('.reveal .slides');
  box.style.cssText = 'width: 1280px; display: block; position: static';
  const all = [...box.querySelectorAll(':scope > section')];
  for (const s of all) {{  // flow-root: margins counted, as in the deck
    s.style.display = 'flow-root'; s.style.position = 'static';
  }}
  // laid out once, the slides ask for the faces they use (bold, italic)
  void box.offsetHeight;
  return document.fonts.ready.then(() => {{
    all.forEach(fitSlide);
    for (const s of all) {{ s.style.display = ''; s.style.position = ''; }}
    box.style.cssText = '';
  }});
}}
// ?script: the speaker notes alone, slide by slide (number, title, notes), as one page to read or
// print (the handouts' NN_name-notes.pdf): a few pages a deck, where reveal.js's own notes print
// takes two pages a slide. The formulas are already typeset; the nodes are moved, not copied.
function showScript() {{
  const slides = [...document.querySelectorAll('.reveal .slides > section')];
  const main = document.createElement('main');
  main.className = 'script';
  const h1 = document.createElement('h1');
  h1.textContent = document.title.replace(/: slides$/, '') + ': speaker notes';
  main.append(h1);
  const lead = document.createElement('p');
  lead.className = 'lead';
  lead.textContent = "Slides count from the first after the title, as the deck's counter does.";
  main.append(lead);
  slides.forEach((s, i) => {{
    const item = document.createElement('section');
    const head = document.createElement('h2');
    const title = s.querySelector('h1, h2');
    head.append(i === 0 ? 'Title slide' : `Slide ${{i}}`);  // the title, formulas typeset
    if (title) {{ head.append(': ', ...title.childNodes); }}
    item.append(head);
    const notes = s.querySelector('aside.notes');
    if (notes) {{ item.append(...notes.childNodes); }}
    main.append(item);
  }});
  document.body.replaceChildren(main);
  document.body.classList.add('script-view');
  document.documentElement.classList.remove('reveal-full-page');
  window.scriptReady = true;
}}
function startDeck() {{
  if (new URLSearchParams(location.search).has('script')) {{ return showScript(); }}
  // The print view numbers its pages 1, 2, ...; the title slide is uncounted in the deck, so the printed
  // numbers restart after it, as the deck's counter and the run sheets count (window.pdfNumbered: done).
  Reveal.on('pdf-ready', () => {{
    document.querySelectorAll('.pdf-page .slide-number-pdf').forEach(
      (e, i) => {{ if (i === 0) e.remove(); else e.textContent = i; }});
    window.pdfNumbered = true;
  }});
  return fitSlides().then(() => Reveal.initialize({{
    width: 1280, height: 720, margin: 0.04, center: false, hash: true, slideNumber: "c/t",
    controlsLayout: "edges", controlsTutorial: false,
    transition: "none", pdfMaxPagesPerSlide: 1, pdfSeparateFragments: false,
    plugins: [RevealNotes]
  }}));
}}
</script>
<script src="../_static/revealjs/reveal.js"></script>
<script src="../_static/revealjs/plugin/notes.js"></script>
<script defer src="../_static/mathjax/startup.js"></script>
</head>
<body>
<div class="reveal tex2jax_ignore"><div class="slides">
{slides}
</div></div>
</body>
</html>
"""

CSS = """/* The book's slide decks (tools/slides.py): 1280 x 720, reveal.js white theme, smaller type. */
.reveal { font-size: 27px; }
.reveal .slides { text-align: left; }
.reveal .slides section { padding: 0 24px; box-sizing: border-box; }
.reveal pre { box-sizing: border-box; }
.reveal h1 { font-size: 1.75em; text-transform: none; line-height: 1.15; }
.reveal h2 { font-size: 1.3em; text-transform: none; margin-bottom: 0.45em; line-height: 1.15; }
.reveal p, .reveal li { line-height: 1.3; }
.reveal p { margin: 0.35em 0; }
.reveal ul, .reveal ol { display: block; margin-left: 1.1em; }
.reveal li { margin: 0.15em 0; }
.reveal .subtitle { color: #555; font-size: 0.85em; }
.reveal .nobr { white-space: nowrap; }
.reveal .prf { border-left: 6px solid #0072B2; background: #f2f7fb; padding: 0.3em 0.8em; margin: 0.4em 0; }
.reveal .prf-title { font-weight: 600; margin-top: 0.1em; }
.reveal .prf-kind { color: #0072B2; margin-right: 0.3em; }
.reveal .exercise { border-left: 6px solid #E69F00; background: #fdf6e8; padding: 0.3em 0.8em;
  margin: 0.4em 0; font-size: 0.88em; }
.reveal .exercise-title { font-weight: 600; }
.reveal .check { margin: 0.5em 0; }
.reveal .check-title { color: #555; font-size: 0.8em; }
.reveal .check pre { width: 100%; box-shadow: none; background: #f4f4f4; padding: 0.5em 0.7em;
  font-size: 0.8em; white-space: pre-wrap; word-break: break-word; border-left: 6px solid #009E73; }
.reveal pre code { max-height: none; }
.reveal figure { margin: 0; text-align: center; }
.reveal figure img { max-height: 480px; max-width: 100%; margin: 0 auto;
  display: block; }
.reveal section.has-figure h2 { margin-bottom: 0.2em; }
.reveal figcaption { font-size: 0.8em; color: #222; text-align: left; line-height: 1.3; margin-top: 0.2em; }
/* a check beside a figure: compact, its title a small line above the printed lines */
.reveal section.has-figure .check { margin: 0.25em 0 0; }
.reveal section.has-figure .check-title { font-size: 0.62em; margin: 0 0 0.15em; }
.reveal section.has-figure .check pre { margin: 0; padding: 0.2em 0.6em;
  font-size: 0.7em; line-height: 1.25; }
.reveal section.has-figure .text { font-size: 0.85em; }
.reveal .fig-number { font-weight: 600; }
/* until its figure shows, a figure slide says that it comes on the next key (a stand-in lecturer is not
   left wondering whether the deck is broken); it takes no room, and prints hidden */
.reveal section.has-figure:not(.has-predict):has(figure.fragment:not(.visible))::after {
  content: "predict first: the figure comes on the next key (\\2192)"; position: absolute; top: 45%;
  left: 0; right: 0; text-align: center; font-size: 0.6em; color: #888; }
@media print { .reveal section.has-figure::after { display: none; } }
.reveal .also { font-size: 0.75em; color: #444; margin-top: 0.6em; }
/* the notes' prediction question, on the slide until the figure shows */
.reveal section.has-predict .predict { position: absolute; top: 32%; left: 6%; right: 6%;
  text-align: center; font-size: 1.05em; line-height: 1.4; margin: 0; }
.reveal section.has-predict .predict-cue { display: block; margin-top: 1.2em; font-size: 0.55em;
  color: #888; }
.reveal section.has-predict:has(figure.fragment.visible) .predict { display: none; }
@media print { .reveal section.has-predict .predict { display: none; } }
.reveal .text, .reveal .section { font-size: 1.05em; }
.reveal .math { font-size: 1em; }
.reveal mjx-container[display="true"] { margin: 0.4em 0 !important; }
.reveal a { color: #0072B2; }
.reveal .slides section.title-slide { height: 700px; }
.reveal .objectives { font-size: 0.85em; }
.reveal .objectives p { margin: 0.2em 0; }
.reveal .built { position: absolute; bottom: 20px; left: 24px; right: 24px; font-size: 0.55em; color: #666; }
.reveal .block-title { font-weight: 600; }
@media print { .reveal .slide-number { display: none; } }
/* ?script: the speaker notes alone, slide by slide (showScript) */
body.script-view { overflow: auto; font: 11pt/1.4 "Source Sans Pro", Helvetica, Arial, sans-serif;
  color: #111; max-width: 48em; margin: 1.5em auto; padding: 0 1em; }
body.script-view h1 { font-size: 16pt; margin: 0 0 0.2em; }
body.script-view .lead { color: #555; font-size: 9.5pt; margin: 0 0 0.8em; }
body.script-view section { break-inside: avoid; border-top: 1px solid #ccc; padding: 0.3em 0; }
body.script-view h2 { font-size: 11.5pt; margin: 0.1em 0 0.2em; color: #0072B2; }
body.script-view p { margin: 0.2em 0; }
/* a printed check line or a long name wraps: one line wider than the page would make the print shrink
   every page to fit it, and still clip it */
body.script-view pre { white-space: pre-wrap; overflow-wrap: anywhere; font-size: 9.5pt; margin: 0.3em 0; }
body.script-view code { overflow-wrap: anywhere; }
@media print { @page { size: A4; margin: 14mm; } body.script-view { margin: 0; max-width: none; } }
"""


def objectives(lesson: Lesson) -> str:
    """The lesson's learning objectives (its opening box), or '' when it states none."""
    text = "\n\n".join(lesson.markdown[:3])
    m = re.search(
        r"\*\*Learning objectives\.\*\*(?P<body>.*?)(?=\n\*\*[A-Z][a-z]+\.\*\*|\n:::|\Z)",
        text,
        re.S,
    )
    return m.group("body").strip() if m else ""


def title_slide(lesson: Lesson, r: Renderer, outline: Path, lab: bool) -> str:
    lab_link = f' · <a href="../book/labs/{lesson.stem}.html">its lab</a>' if lab else ""
    goals = objectives(lesson)
    goals = f'<div class="objectives">{r.block(goals)}</div>\n' if goals else ""
    return (
        # uncounted: the counter, bottom right, numbers the slides after it 1, 2, ..., as the plan does
        '<section class="title-slide" data-visibility="uncounted">\n'
        f'<p class="subtitle">Lesson {lesson.number} · Softmax as Linear Attention, Executed</p>\n'
        f"<h1>{html.escape(lesson.title)}</h1>\n"
        f"{goals}"
        f'<p><a href="../book/{lesson.stem}.html">The lesson</a>{lab_link} · '
        f'<a href="../book/instructor.html">for instructors</a></p>\n'
        f'<p class="built">Figures and numbers: the executed lesson, this build '
        f"({html.escape(lesson.mode)} mode).</p>\n"
        '<aside class="notes">The students have read this lesson before the session. A figure '
        "slide opens on its title: ask what the figure will show, then the next key press brings it "
        "with its check. An exercise slide's notes give the answer and the minutes to allow. Each "
        "figure and printed number is the lesson's own. To change a word, cut a slide or add a "
        "note without the repository, edit this HTML file (a section per slide; the book's page "
        "<i>Adapting and rebuilding the kit</i> says how); with the repository, edit "
        f"<code>book/slides/{outline.name}</code> and rebuild (<code>make book</code>), which "
        "redraws the deck from the lesson.</aside>\n"
        "</section>"
    )


BADGE = (
    '<a class="slides-link reference external" href="../slides/{stem}.html" title="This lesson as '
    'slides: opens offline; add ?print-pdf to the address to print it">'
    '<svg xmlns="http://www.w3.org/2000/svg" width="98" height="20" viewBox="0 0 98 20" role="img" '
    'aria-label="Lesson slides"><title>Lesson slides</title>'
    '<rect width="98" height="20" rx="3" fill="#555"/><rect x="50" width="48" height="20" rx="3" '
    'fill="#0072B2"/><rect x="50" width="4" height="20" fill="#0072B2"/>'
    '<g fill="#fff" font-family="Verdana,DejaVu Sans,sans-serif" font-size="11" text-anchor="middle">'
    '<text x="25" y="14">Lesson</text><text x="74" y="14">slides</text></g></svg></a> '
)


def link_from_lesson(html_dir: Path, stem: str) -> None:
    """Put a "Lesson slides" badge on the lesson's page, beside its "Open in Colab" badge (or under its
    title when the page has none); once."""
    page = html_dir / "book" / f"{stem}.html"
    text = page.read_text(encoding="utf-8")
    if 'class="slides-link' in text:
        return
    badge = BADGE.format(stem=stem)
    if '<span class="paper-link">' in text:
        text = text.replace('<span class="paper-link">', badge + '<span class="paper-link">', 1)
    elif "</h1>" in text:
        text = text.replace("</h1>", f'</h1>\n<p class="slides-badge-line">{badge}</p>', 1)
    else:
        raise OutlineError(f"{page}: no title to put the slides link under")
    page.write_text(text, encoding="utf-8")


DECK_LIST = re.compile(r'<div id="slide-decks" class="slide-decks">.*?</div>', re.S)


def deck_items(html_dir: Path, prefix: str) -> list[str]:
    """One ``<li>`` per deck of the site, in lesson order: its link (``prefix`` + file name), its
    number of slides after the title slide (as the plan counts them) and its print view."""
    items = []
    for n, md in enumerate(lessons(ROOT), 1):
        deck = html_dir / "slides" / f"{md.stem}.html"
        if deck.exists():
            count = deck.read_text(encoding="utf-8").count("<section") - 1
            title = html.escape(chapter_title(md))
            items.append(
                f'<li><a href="{prefix}{md.stem}.html">Lesson {n}: {title}</a> (a title slide and '
                f'{count} slides; <a href="{prefix}{md.stem}.html?print-pdf">print view</a>)</li>'
            )
    return items


INDEX = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Slides: one deck per lesson</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 46rem; margin: 2rem auto; padding: 0 1rem;
  line-height: 1.5; color: #222; }}
li {{ margin: 0.4rem 0; }} a {{ color: #1a5fb4; }} kbd {{ border: 1px solid #bbb; border-radius: 3px;
  padding: 0 0.3em; font-size: 0.9em; }}
@media (prefers-color-scheme: dark) {{ body {{ background: #121212; color: #ddd; }} a {{ color: #8ab4f8; }} }}
</style></head>
<body>
<h1>Slides: one deck per lesson</h1>
<p>Each deck is built from its executed lesson: its figures and numbers are the lesson's own. The decks
open offline from this folder. In a deck, <kbd>F</kbd> goes full screen and <kbd>Esc</kbd> shows every
slide; the print view prints one slide a page (print to PDF from the browser).<span class="speaker-note">
<kbd>S</kbd> opens the speaker view: the presenter notes and the minutes of each slide.</span></p>
<ul>
{items}
</ul>
<p>The plan that uses them, session by session: <a href="../book/instructor.html">For instructors</a>.
The book: <a href="../index.html">home page</a>.</p>
</body></html>
"""


def write_index(html_dir: Path) -> int:
    """Write ``slides/index.html``, the list of every deck; return how many it lists."""
    items = deck_items(html_dir, "")
    (html_dir / "slides" / "index.html").write_text(
        INDEX.format(items="\n".join(items)), encoding="utf-8"
    )
    return len(items)


def list_on_instructor_page(html_dir: Path) -> int:
    """Fill the instructor page's list of decks (``<div id="slide-decks">`` in ``book/instructor.md``)
    with every deck of the site, in lesson order; return how many."""
    page = html_dir / "book" / "instructor.html"
    text = page.read_text(encoding="utf-8")
    if not DECK_LIST.search(text):
        raise OutlineError(
            f'{page}: no <div id="slide-decks" class="slide-decks"> to list the decks in'
        )
    items = deck_items(html_dir, "../slides/")
    block = '<div id="slide-decks" class="slide-decks"><ul>' + "".join(items) + "</ul></div>"
    page.write_text(DECK_LIST.sub(lambda _: block, text, count=1), encoding="utf-8")
    return len(items)


def load_outline(path: Path) -> dict:
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise OutlineError(f"{path.name}: not valid YAML: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("slides"), list) or not data["slides"]:
        raise OutlineError(f"{path.name}: an outline is a mapping with a non-empty list `slides:`")
    if data.get("lesson", path.stem) != path.stem:
        raise OutlineError(f"{path.name}: `lesson: {data['lesson']}` is not the file's name")
    return data


def build_deck(stem: str, stage: Path, number: int, *, write: bool = True) -> dict:
    """Build (or, ``write=False``, only resolve) one lesson's deck; return what it holds."""
    outline = OUTLINES / f"{stem}.yml"
    ipynb = stage / "book" / f"{stem}.ipynb"
    if not ipynb.exists():
        raise OutlineError(
            f"{ipynb} does not exist: execute the lesson first (tools/build_book.py)"
        )
    data = load_outline(outline)
    lesson = read_lesson(ipynb, number)
    r = Renderer(lesson)
    html_dir = stage / "_build" / "html"
    out = html_dir / "slides"
    sections, files = (
        [title_slide(lesson, r, outline, (html_dir / "book" / "labs" / f"{stem}.html").exists())],
        {},
    )
    for i, slide in enumerate(data["slides"], 1):
        section, needed = render_slide(lesson, r, slide, i, out / stem, stem)
        sections.append(section)
        files.update(needed)
    # The deck's last exercise slide names the lesson's exercises that no slide shows, so that the
    # room knows which are homework with the reading.
    on_slides = [i for i, s in enumerate(data["slides"], 1) if s.get("exercises")]
    if on_slides:
        shown = {
            e if isinstance(e, str) else e.get("label")
            for s in data["slides"]
            for e in as_list(s.get("exercises") or [])
        }
        others = sorted(
            (n, label) for label, n in lesson.exercise_numbers.items() if label not in shown
        )
        if others:
            names = "; ".join(
                f"{exercise_name(lesson, label)}, {r.inline(lesson.blocks[label].title)}"
                for _, label in others
            )
            also = f'<p class="also">Also with the reading: {names}.</p>'
            k = on_slides[-1]  # sections[0] is the title slide
            head, notes, tail = sections[k].partition('<aside class="notes">')
            if not notes:
                head, tail = head.removesuffix("\n</section>"), "\n</section>"
            sections[k] = head + also + "\n" + notes + tail
    deck = PAGE.format(
        title=html.escape(f"Lesson {lesson.number}: {lesson.title}"),
        mathjax=json.dumps(mathjax_config()),
        floor=FIT_FLOOR,
        min_figure=MIN_FIGURE,
        figure_room=FIGURE_ROOM,
        grow=TEXT_GROW,
        text_room=TEXT_ROOM,
        slides="\n".join(sections),
    )
    if write:
        (out / stem).mkdir(parents=True, exist_ok=True)
        for old in (out / stem).glob("*.png"):
            old.unlink()
        for name, data_ in files.items():
            (out / stem / name).write_bytes(data_)
        (out / "slides.css").write_text(CSS)
        (out / f"{stem}.html").write_text(deck, encoding="utf-8")
        link_from_lesson(html_dir, stem)
    return {
        "lesson": stem,
        "slides": len(sections),
        "figures": sorted(files),
        "path": out / f"{stem}.html",
        "html": deck,
    }


def outlines_for(root: Path = ROOT) -> list[tuple[str, int]]:
    """(stem, lesson number) of every lesson of ``_toc.yml`` that has an outline, in reading order."""
    return [
        (md.stem, n)
        for n, md in enumerate(lessons(root), 1)
        if (OUTLINES / f"{md.stem}.yml").exists()
    ]


def build_all(stage: Path, only=None, *, write: bool = True) -> list[dict]:
    known = {md.stem for md in lessons(ROOT)}
    orphans = sorted(p.stem for p in OUTLINES.glob("*.yml") if p.stem not in known)
    if orphans:  # an outline waiting for its lesson (a lesson being written): said, not built
        print(f"slides: no lesson in _toc.yml for the outline(s) {orphans}; skipped", flush=True)
    targets = [(s, n) for s, n in outlines_for() if not only or s in only]
    if only:
        missing = set(only) - {s for s, _ in targets}
        if missing:
            raise OutlineError(f"no outline for {sorted(missing)} (book/slides/<lesson>.yml)")
    if write and not (stage / "_build" / "html" / "_static" / "revealjs" / "reveal.js").exists():
        raise OutlineError(
            f"{stage / '_build/html/_static/revealjs'} is missing: build the site first "
            "(tools/build_book.py; tools/fetch_vendor.py vendors reveal.js)"
        )
    decks = [build_deck(stem, stage, n, write=write) for stem, n in targets]
    if write:
        list_on_instructor_page(stage / "_build" / "html")
        write_index(stage / "_build" / "html")
    return decks


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--stage", type=Path, default=ROOT / "_build" / "stage")
    ap.add_argument("--only", nargs="*", default=None, help="lesson stems (default: every outline)")
    ap.add_argument("--check", action="store_true", help="resolve every outline; write nothing")
    args = ap.parse_args(argv)
    try:
        decks = build_all(args.stage.resolve(), args.only, write=not args.check)
    except OutlineError as exc:
        print(f"slides: {exc}", file=sys.stderr)
        return 1
    for d in decks:
        print(
            f"slides: {d['lesson']}: {d['slides']} slides, {len(d['figures'])} figure(s)"
            + ("" if args.check else f" -> {d['path']}"),
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
