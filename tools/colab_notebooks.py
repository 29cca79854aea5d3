#!/usr/bin/env python
"""Convert the book's notebooks for plain Markdown front ends (Colab, Jupyter, GitHub, VS Code).

One conversion serves every notebook a reader is handed: what the "Open in Colab" badge opens, the
site's *Download .ipynb* and the student copies (``tools/student_notebooks.py``). The paired
``book/NN_*.ipynb`` and ``book/labs/NN_*.ipynb`` hold the book's MyST markup in their Markdown cells
(``{exercise}``, ``{solution}``, ``{prf:*}`` and admonition directives; ``{numref}``, ``{ref}``,
``{doc}``, ``{prf:ref}`` and ``{cite}`` roles; ``(label)=`` targets) and their figures' captions in
cell metadata, which a plain front end shows as raw text or not at all. In the converted copy

* an exercise, a theorem-like block or an admonition becomes a bold title and a blockquote, numbered
  as the site numbers it ("**Exercise 5.1** (title)", "**Theorem 5.1** (title)");
* a solution ("Solution to Exercise 5.1"), a folded proof or a dropdown admonition becomes an HTML
  ``<details>`` block; a student copy (``audience="student"``) has no solutions at all;
* every captioned figure cell is followed by a Markdown cell with its number and caption ("**Fig. 5.3.**
  ..."), as the site shows it under the figure;
* ``{numref}`` becomes "Fig. 5.8" or "Exercise 5.1", ``{ref}``, ``{prf:ref}`` and ``{doc}`` their
  target's title, each a link to its anchor on the book's site; ``{cite}`` the reference's authors and
  year, linked to the paper (DOI, arXiv) or to the site's references; a ``(label)=`` target an anchor;
* the TeX macros of ``_config.yml`` (``mathjax3_config.tex.macros``) are written out;
* the setup cell installs ``softlin`` at the commit the notebook was converted from (``--commit``, by
  default the checkout's ``HEAD``), and says so; a ``softlin-*.whl`` in the working directory (the
  student copies' folder carries one) still comes first, as in the template.

The numbers are the site's: Sphinx numbers figures, exercises and each kind of theorem-like block with
one counter per kind and per chapter of a numbered part ("5.1", "5.2", ...), and with one counter per
kind over all unnumbered pages in reading order ("1", "2", ...); :class:`Converter` counts them the same
way over the pages of ``_toc.yml`` (``tests/test_reader_channels.py`` compares them with a built site).
A construct with no plain form (an unknown directive or role) is an error, never raw text.

Code cells are not changed, except the setup cell. The MyST pairs stay the source; these copies are
build products::

    python tools/colab_notebooks.py                      # _build/colab/book/**.ipynb
    python tools/colab_notebooks.py --out DIR 01_measure_view labs/01_measure_view

The Pages workflow (``.github/workflows/book.yml``) writes them to the ``colab`` branch (main's tree with
``book/**.ipynb`` replaced), which the badge and the launch button open (``repository.branch`` in
``_config.yml``), and into the site's ``colab/`` folder; ``tools/build_book.py`` converts the site's
downloadable notebooks (``_sources/``) in place with :func:`convert_site_downloads`.
"""

from __future__ import annotations

import argparse
import copy
import posixpath
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import nbformat
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "book" / "_ext"))
from book_site import lab_section_number  # the site's rule, so the two number labs alike
from build_book import notebook_chapters, page_name, toc_files

ROOT = Path(__file__).resolve().parents[1]

# An opening fence (3+ backticks or colons) of a MyST directive, its name and argument.
FENCE = re.compile(r"^(?P<fence>`{3,}|:{3,})\{(?P<name>[a-zA-Z][\w:-]*)\}[ \t]*(?P<arg>[^\n]*)$")
ROLE = re.compile(r"\{(?P<role>[a-zA-Z][\w:-]*)\}`(?P<body>[^`]*)`")
TARGET = re.compile(r"^\((?P<label>[\w.-]+)\)=[ \t]*$", re.MULTILINE)
OPTION = re.compile(r"^:(?P<key>[\w-]+):[ \t]*(?P<value>[^\n]*)$")
#: What a reader of plain Markdown would still see of MyST: a directive fence, a role, a ``(label)=``
#: target, or a directive option line (``:label: ...``, ``:class: ...``).
RAW_MYST = re.compile(
    r"^[ \t>]*(`{3,}|:{3,})\{[a-zA-Z]"
    r"|\{[a-zA-Z][\w:-]*\}`"
    r"|^[ \t>]*\([\w.-]+\)=[ \t]*$"
    r"|^[ \t>]*:(label|class|name|nonumber|tags|dropdown|open):",
    re.MULTILINE,
)
#: Tag of the Markdown cell that shows a figure's number and caption under its code cell.
CAPTION_TAG = "figure-caption"
#: Where the setup cell of a page starts (tools/new_chapter.py writes it).
SETUP_MARK = "# Setup for Colab"

PRF_KINDS = {
    "axiom": "Axiom",
    "theorem": "Theorem",
    "lemma": "Lemma",
    "algorithm": "Algorithm",
    "definition": "Definition",
    "remark": "Remark",
    "conjecture": "Conjecture",
    "corollary": "Corollary",
    "criterion": "Criterion",
    "example": "Example",
    "property": "Property",
    "observation": "Observation",
    "proposition": "Proposition",
    "assumption": "Assumption",
    "notation": "Notation",
    "proof": "Proof",  # not numbered
}
ADMONITIONS = {
    "note",
    "tip",
    "warning",
    "important",
    "caution",
    "attention",
    "hint",
    "seealso",
    "danger",
    "error",
}


#: Where the Pages workflow publishes the student edition of the site (``make student-site``), under
#: the book's own address: a student copy's links go there (no solutions, no instructors' pages).
STUDENT_EDITION = "student/"


#: Stands for the site a copy links to in a reference's link to the book's references page, filled
#: in per copy (the book's site, or the student edition for a student copy).
SITE_MARK = "\x00site/"


def site_url(config: dict) -> str:
    """The book's site: ``html.baseurl`` if set, else GitHub Pages of ``repository.url``."""
    base = (config.get("html") or {}).get("baseurl")
    if base:
        return base.rstrip("/") + "/"
    repo = config["repository"]["url"].rstrip("/")
    org, name = repo.split("github.com/", 1)[1].split("/")[:2]
    return f"https://{org.lower()}.github.io/{name}/"


def parse_blocks(text: str) -> list:
    """Split Markdown into plain strings and directive dicts {name, arg, options, body} (nested bodies
    stay text: :meth:`Converter.convert_markdown` converts them recursively)."""
    lines = text.split("\n")
    out, plain, i = [], [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            plain.append(lines[i])
            i += 1
            continue
        fence = m["fence"]
        j, depth = i + 1, 0
        while j < len(lines):
            line = lines[j].rstrip()
            opener = FENCE.match(lines[j])
            if opener and opener["fence"] == fence:
                depth += 1
            elif line == fence:
                if depth == 0:
                    break
                depth -= 1
            j += 1
        body = lines[i + 1 : j]
        options = {}
        while body and OPTION.match(body[0]):
            o = OPTION.match(body[0])
            options[o["key"]] = o["value"].strip()
            body = body[1:]
        if plain:
            out.append("\n".join(plain))
            plain = []
        out.append(
            {
                "name": m["name"],
                "arg": m["arg"].strip(),
                "options": options,
                "body": "\n".join(body),
            }
        )
        i = j + 1
    if plain:
        out.append("\n".join(plain))
    return out


def quote(text: str) -> str:
    return "\n".join("> " + line if line.strip() else ">" for line in text.strip("\n").split("\n"))


def details(summary: str, body: str) -> str:
    return f"<details>\n<summary><b>{summary}</b></summary>\n\n{body.strip()}\n\n</details>"


def raw_myst(text: str) -> list[str]:
    """The MyST constructs (directive fences, roles, targets, option lines) left in Markdown ``text``."""
    return [m.group(0).strip() for m in RAW_MYST.finditer(text)]


def tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def figure_of(cell) -> dict:
    """The ``mystnb: figure:`` metadata of a code cell ({} when it has none)."""
    return dict((cell.get("metadata", {}).get("mystnb") or {}).get("figure") or {})


def shows_figure(cell) -> bool:
    """Whether the site shows this code cell's output as a captioned figure."""
    return (
        cell.cell_type == "code"
        and bool(figure_of(cell).get("caption"))
        and not {"remove-cell", "remove-output"} & set(tags(cell))
    )


def checkout_commit(root: Path) -> str | None:
    """The commit of the checkout at ``root`` (``git rev-parse HEAD``), or None outside git."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=False
        )
    except OSError:
        return None
    out = done.stdout.strip()
    return out if done.returncode == 0 and re.fullmatch(r"[0-9a-f]{40}", out) else None


def uncommitted_library(root: Path) -> list[str]:
    """Files of the library (``lib/``, ``pyproject.toml``) that differ from ``HEAD`` at ``root``."""
    try:
        done = subprocess.run(
            ["git", "status", "--porcelain", "--", "lib", "pyproject.toml"],
            cwd=root,
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError:
        return []
    return [line[3:] for line in done.stdout.splitlines() if line.strip()]


def lab_number(page: str) -> tuple[str, ...]:
    """``("L2",)`` for lab 2 (``book/labs/02_name``), () for another page of an unnumbered part: the
    site numbers a lab's figures "Fig. L2.1", ... by the same rule (``book/_ext/book_site.py``)."""
    return lab_section_number(page) or ()


def toc_numbers(root: Path) -> dict[str, tuple]:
    """{page: its number} for every page of ``_toc.yml``: (N,) for the N-th chapter of the numbered parts
    (numbering runs on across numbered parts, Jupyter Book's default), (N, k) for the k-th section page
    below it, ("L2",) for lab 2 (:func:`lab_number`), () for another page of an unnumbered part (or the
    root)."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    out = {toc["root"]: ()}
    chapter = 0

    def walk(entries, prefix, numbered):
        nonlocal chapter
        for k, entry in enumerate(entries or [], 1):
            if "file" not in entry:
                continue
            if numbered and not prefix:
                chapter += 1
                number = (chapter,)
            else:
                number = (*prefix, k) if numbered else lab_number(entry["file"])
            out[entry["file"]] = number
            walk(entry.get("sections"), number, numbered)

    if "parts" in toc:
        for part in toc["parts"]:
            walk(part.get("chapters"), (), bool(part.get("numbered")))
    else:
        walk(toc.get("chapters"), (), bool(toc.get("defaults", {}).get("numbered")))
    return out


class _PageCount:
    """Gives the numbered blocks of one page their numbers, in document order, as Sphinx does: one
    counter per kind (``prf_realtyp_to_countertyp`` may share one between kinds) and per section number
    (the chapter's, or () for every unnumbered page), shared with the pages counted before."""

    def __init__(self, conv, page: str, secnum: tuple, counters: Counter):
        self.conv, self.page, self.secnum, self.counters = conv, page, secnum, counters
        self.seen: Counter = Counter()

    def __call__(self, kind: str, label: str | None, title: str, numbered: bool = True) -> None:
        self.seen[kind] += 1
        value = None
        if numbered:
            key = (self.conv.counter_of.get(kind, kind), self.secnum)
            self.counters[key] += 1
            value = ".".join(map(str, (*self.secnum, self.counters[key])))
        self.conv.numbers[(self.page, kind, self.seen[kind])] = value
        if label:
            self.conv.labels[label] = {
                "page": self.page,
                "kind": kind,
                "number": value,
                "title": title,
            }


class Converter:
    """Converts the Markdown of the book's pages, with an index of every label and number they define.

    ``commit``: the commit the setup cells install ``softlin`` at (default: the checkout's ``HEAD``;
    ``""`` keeps the source's ``@main``)."""

    def __init__(self, root: Path = ROOT, commit: str | None = None, site: str | None = None):
        self.root = Path(root).resolve()
        self.config = yaml.safe_load((self.root / "_config.yml").read_text())
        # where links to other pages go: the book's site, or ``site`` (a hosted student edition);
        # a student copy's links go to ``site``, else to the student edition the Pages workflow
        # publishes under the book's site (STUDENT_EDITION)
        self.site = site.rstrip("/") + "/" if site else site_url(self.config)
        self.student_site = (
            site.rstrip("/") + "/" if site else site_url(self.config) + STUDENT_EDITION
        )
        sphinx = (self.config.get("sphinx") or {}).get("config") or {}
        self.secnum_depth = int(sphinx.get("numfig_secnum_depth", 1))
        self.counter_of = {k: k for k in PRF_KINDS} | dict(
            sphinx.get("prf_realtyp_to_countertyp") or {}
        )
        self.formats = {"figure": "Fig. %s", "exercise": "Exercise %s"} | {
            k: f"{v} %s" for k, v in PRF_KINDS.items()
        }
        self.formats.update(sphinx.get("numfig_format") or {})
        macros = ((sphinx.get("mathjax3_config") or {}).get("tex") or {}).get("macros") or {}
        self.macros = {name: value for name, value in macros.items() if isinstance(value, str)}
        self.commit = checkout_commit(self.root) if commit is None else (commit or None)
        self.labels: dict[str, dict] = {}  # label -> {page, kind, number, title}
        self.numbers: dict[tuple[str, str, int], str | None] = {}  # (page, kind, k-th) -> number
        self.titles: dict[str, str] = {}  # page (book/NN_name) -> title
        self.references = self._references()
        self._index()

    # --- the index of labels and numbers -------------------------------------------------------------

    def _index(self) -> None:
        import jupytext

        secnums = {p: n[: self.secnum_depth] for p, n in toc_numbers(self.root).items()}
        counters: Counter = Counter()  # (counter kind, section number) -> last number given
        for page in toc_files(self.root / "_toc.yml"):
            md = self.root / f"{page}.md"
            if not md.is_file():
                continue
            text = md.read_text()
            heading = re.search(r"^# (.+)$", text, re.MULTILINE)
            self.titles[page] = heading.group(1).strip() if heading else page
            nb = jupytext.read(md) if "kernelspec" in text[:600] else None
            cells = nb.cells if nb else [nbformat.v4.new_markdown_cell(text)]
            count = _PageCount(self, page, secnums.get(page, ()), counters)
            for cell in cells:
                if cell.cell_type == "code":
                    fig = figure_of(cell)
                    if shows_figure(cell):
                        # Sphinx numbers a figure only when it has an id (mystnb: figure: name)
                        count("figure", fig.get("name"), fig["caption"], bool(fig.get("name")))
                    continue
                if cell.cell_type != "markdown":
                    continue
                for m in re.finditer(r"^\((?P<label>[\w.-]+)\)=\s*\n+#+ (?P<title>.+)$",
                                     cell.source, re.MULTILINE):  # fmt: skip
                    self.labels[m["label"]] = {
                        "page": page,
                        "kind": "section",
                        "number": None,
                        "title": m["title"].strip(),
                    }
                self._index_directives(cell.source, count)

    def _index_directives(self, text: str, count) -> None:
        """Number the directives of ``text`` in document order (a block before the blocks inside it)."""
        for block in parse_blocks(text):
            if isinstance(block, str):
                continue
            name, options = block["name"], block["options"]
            label, numbered = options.get("label"), "nonumber" not in options
            if name == "exercise":
                count("exercise", label, block["arg"], numbered)
            elif name.startswith("prf:") and name != "prf:proof":
                count(name[4:], label, block["arg"], numbered)
            self._index_directives(block["body"], count)

    def _references(self) -> dict[str, str]:  # a link to the references page holds SITE_MARK
        """{bibtex key: "Authors (year)" as Markdown, linked to its DOI, arXiv page or URL}."""
        from pybtex.database import parse_file

        out = {}
        for bib in self.config.get("bibtex_bibfiles", []):
            for key, entry in parse_file(str(self.root / bib)).entries.items():
                people = entry.persons.get("author", [])
                names = [" ".join(p.last_names) for p in people]
                who = (
                    names[0]
                    if len(names) == 1
                    else " and ".join(names)
                    if len(names) == 2
                    else f"{names[0]} et al."
                )
                who = re.sub(r"[{}]", "", who)
                f = entry.fields
                arxiv = re.search(
                    r"arXiv:(\d{4}\.\d{4,5})", f.get("note", "") + f.get("eprint", "")
                )
                link = (
                    f"https://doi.org/{f['doi']}"
                    if "doi" in f
                    else f"https://arxiv.org/abs/{arxiv.group(1)}"
                    if arxiv
                    else f.get("url") or f"{SITE_MARK}book/references.html"
                )
                out[key] = f"[{who} ({f.get('year', 'n.d.')})]({link})"
        return out

    # --- numbers and names ---------------------------------------------------------------------------

    def name(self, kind: str, number: str | None) -> str:
        """What the site calls a numbered block: "Fig. 5.3", "Exercise 5.1", "Theorem 5.2"."""
        if number is None:
            return "Figure" if kind == "figure" else PRF_KINDS.get(kind, kind.title())
        return self.formats.get(kind, f"{kind.title()} %s").replace("%s", number)

    def link(self, label: str, text: str | None = None, numref: bool = False) -> str:
        if label not in self.labels:
            raise KeyError(f"unknown label {label!r} (not in any page of _toc.yml)")
        target = self.labels[label]
        if text is None:
            kind, number, title = target["kind"], target["number"], target["title"]
            if kind == "section":
                text = title
            elif number is not None:  # as the site writes it: "Fig. 5.3", "Exercise 5.1"
                text = self.name(kind, number)
            else:  # an unnumbered block: its kind and title
                text = self.name(kind, None) + (f" ({title})" if title else "")
        elif numref and target["number"] is not None:
            text = text.replace("%s", target["number"]).replace("{number}", target["number"])
        return f"[{text}]({self.site}{target['page']}.html#{label})"

    # --- conversion ----------------------------------------------------------------------------------

    def role(self, m: re.Match, page: str) -> str:
        role, body = m["role"], m["body"]
        explicit = re.fullmatch(r"(?P<text>.+?)\s*<(?P<target>[^<>]+)>", body, re.DOTALL)
        text, target = (explicit["text"], explicit["target"]) if explicit else (None, body)
        if role == "cite":
            keys = [k.strip() for k in target.split(",")]
            missing = [k for k in keys if k not in self.references]
            if missing:
                raise KeyError(f"{page}: no reference {missing} in the bibliography")
            # the book's references page of the site this copy links to (a student copy's: the
            # student edition's)
            return "; ".join(self.references[k] for k in keys).replace(SITE_MARK, self.site)
        if role == "doc":
            folder = page.rsplit("/", 1)[0] if "/" in page else ""
            doc = (
                target.lstrip("/")
                if target.startswith("/")
                else posixpath.normpath(posixpath.join(folder, target))
            )
            return f"[{text or self.titles.get(doc, target)}]({self.site}{doc}.html)"
        if role in ("ref", "numref", "prf:ref", "eq"):
            return self.link(target, text, numref=role == "numref")
        raise ValueError(f"{page}: no plain-Markdown form for the role {{{role}}}")

    def inline(self, text: str, page: str) -> str:
        """A title's plain form: its roles written out, the TeX macros expanded."""
        return self.expand_macros(ROLE.sub(lambda m: self.role(m, page), text))

    def expand_macros(self, text: str) -> str:
        for name, value in self.macros.items():
            text = re.sub(rf"\\{name}(?![A-Za-z])", lambda _m, v=value: v, text)
        return text

    def convert_markdown(self, text: str, page: str, state: dict | None = None) -> str:
        """The plain-Markdown form of one Markdown cell of ``page``. ``state`` carries the count of each
        kind of numbered block met so far on the page (a fresh count when None)."""
        state = {"seen": Counter(), "audience": "colab"} if state is None else state
        parts = []
        for block in parse_blocks(text):
            if isinstance(block, str):
                parts.append(block)
                continue
            parts.append(self.directive(block, page, state))
        out = "\n".join(parts)
        out = TARGET.sub(lambda m: f'<a id="{m["label"]}"></a>', out)
        out = ROLE.sub(lambda m: self.role(m, page), out)
        return self.expand_macros(out)

    def number_of(self, page: str, kind: str, state: dict) -> str | None:
        state["seen"][kind] += 1
        return self.numbers.get((page, kind, state["seen"][kind]))

    def directive(self, block: dict, page: str, state: dict) -> str:
        name, arg, options = block["name"], block["arg"], block["options"]
        folded = "dropdown" in options.get("class", "").split()
        # numbered blocks take their number before the blocks inside them, as Sphinx counts them
        number = None
        if name == "exercise" or (name.startswith("prf:") and name != "prf:proof"):
            kind = "exercise" if name == "exercise" else name[4:]
            number = self.number_of(page, kind, state)
            anchor = f'<a id="{options["label"]}"></a>' if options.get("label") else ""
        if name == "solution" and state["audience"] == "student":
            self.convert_markdown(block["body"], page, state)  # keeps the counts of blocks inside
            state["removed"] = state.get("removed", 0) + 1
            return ""
        body = self.convert_markdown(block["body"], page, state)
        arg = self.inline(arg, page)
        if name == "exercise":
            title = f"**{self.name('exercise', number)}**" + (f" ({arg})" if arg else "")
            return f"{anchor}{title}\n\n{quote(body)}"
        if name == "solution":
            target = self.labels.get(block["arg"].strip())
            of = "the exercise"
            if target:  # as the site titles it: "Solution to Exercise 5.1 (its title)"
                of = self.name("exercise", target["number"])
                of += f" ({self.inline(target['title'], page)})" if target["title"] else ""
            return details(f"Solution to {of}", body)
        if name.startswith("prf:"):
            kind = name[4:]
            if name == "prf:proof":
                title = "Proof" + (f" ({arg})" if arg else "")
                return details(title, body) if folded else f"**{title}.** {body.strip()}"
            title = f"**{self.name(kind, number)}**" + (f" ({arg})" if arg else "")
            return f"{anchor}{title}\n\n{quote(body)}"
        if name == "admonition" or name in ADMONITIONS or name == "dropdown":
            title = arg or name.title()
            if folded or name == "dropdown":
                return details(title, body)
            return f"**{title}**\n\n{quote(body)}"
        raise ValueError(f"{page}: no plain-Markdown form for the directive {{{name}}}")

    def caption_cell(self, cell, page: str, state: dict):
        """The Markdown cell that shows a figure cell's number and caption, as the site does."""
        fig = figure_of(cell)
        number = self.number_of(page, "figure", state)
        label = fig.get("name")
        caption = self.convert_markdown(str(fig["caption"]), page, state).strip()
        head = f"**{self.name('figure', number)}.**" if number else ""
        anchor = f'<a id="{label}"></a>' if label else ""
        return nbformat.v4.new_markdown_cell(
            f"{anchor}{head} {caption}".strip(), metadata={"tags": [CAPTION_TAG]}
        )

    def setup_source(self, source: str, page: str) -> str:
        """The setup cell of a converted notebook: the template at the converter's commit."""
        from new_chapter import setup_code

        if source.strip() != setup_code().strip():
            raise ValueError(
                f"{page}: its setup cell differs from the template of tools/new_chapter.py "
                "(run tools/new_chapter.py --refresh-setup)"
            )
        return setup_code(self.commit) if self.commit else source

    def convert(self, nb, page: str, audience: str = "colab"):
        """A copy of the notebook ``nb`` of ``page`` (e.g. ``book/01_measure_view``) for a plain
        front end. ``audience``: ``"colab"`` (solutions folded in ``<details>``) or ``"student"`` (no
        solutions, the copy's metadata counting them, ``softlin.solutions_removed``; links to the
        student edition, :attr:`student_site`, and a reference to an instructors' page reduced to its
        text, as ``tools/student_site.py`` does for the edition)."""
        if audience not in ("colab", "student"):
            raise ValueError(f"audience must be 'colab' or 'student', not {audience!r}")
        if audience == "student":
            full, self.site = self.site, self.student_site
            try:
                return self._convert(nb, page, audience)
            finally:
                self.site = full
        return self._convert(nb, page, audience)

    def _convert(self, nb, page: str, audience: str):
        nb = copy.deepcopy(nb)
        if audience == "student":
            from student_site import labels, student_source

            try:
                gone = labels(self.root)
            except FileNotFoundError:  # a book without the instructors' pages
                gone = set()
            for cell in nb.cells:
                if cell.cell_type == "markdown":
                    cell.source = student_source(cell.source, gone)
        state = {"seen": Counter(), "audience": audience, "removed": 0}
        cells = []
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                cell.source = self.convert_markdown(cell.source, page, state)
                cell.source = re.sub(r"\n{3,}", "\n\n", cell.source).strip("\n")
                if cell.source.strip():
                    cells.append(cell)
                continue
            if cell.cell_type == "code" and cell.source.lstrip().startswith(SETUP_MARK):
                cell.source = self.setup_source(cell.source, page)
            if cell.cell_type == "code" and FOLDED_TAGS & set(tags(cell)):
                fold_code(cell)
            cells.append(cell)
            if shows_figure(cell):
                cells.append(self.caption_cell(cell, page, state))
        nb.cells = cells
        nb.metadata.pop("jupytext", None)
        nb.metadata["softlin"] = {
            "converted_from": self.commit or "main",
            "audience": audience,
            **({"solutions_removed": state["removed"]} if audience == "student" else {}),
        }
        left = raw_myst("\n".join(c.source for c in nb.cells if c.cell_type == "markdown"))
        if left:
            raise ValueError(f"{page}: MyST left after conversion: {left[:5]}")
        return nb


#: The tags of a code cell whose code the site folds away (its output shown): a plain front end
#: folds it too (:func:`fold_code`).
FOLDED_TAGS = frozenset({"hide-input", "hide-cell"})


def fold_code(cell) -> None:
    """Fold a code cell's code, as the site does for ``hide-input`` and ``hide-cell``, in the
    metadata each front end reads, its code unchanged: Colab's ``cellView: form`` (the code behind
    "Show code") and JupyterLab's ``jupyter.source_hidden`` (the input collapsed, one click to open)."""
    cell.metadata["cellView"] = "form"
    cell.metadata.setdefault("jupyter", {})["source_hidden"] = True


def page_of(path: Path, root: Path) -> str:
    """The toc name of a notebook file of the book at ``root`` (``book/labs/01_measure_view``)."""
    return Path(path).resolve().relative_to(root).with_suffix("").as_posix()


def convert_site_downloads(root: Path, html: Path, commit: str | None = None) -> list[Path]:
    """Convert, in place, the executed notebooks a built site offers for download
    (``_sources/<page>.ipynb``), so that *Download .ipynb* gives what Colab opens, with the outputs the
    site shows. Returns the files converted."""
    conv = Converter(root, commit)
    done = []
    for md in notebook_chapters(root):
        page = page_of(md, root)
        target = Path(html) / "_sources" / f"{page}.ipynb"
        if not target.is_file():
            continue
        nb = nbformat.read(target, as_version=4)
        if "softlin" in nb.metadata:  # converted already (a second call on the same site)
            continue
        nb.cells = [c for c in nb.cells if "injected-parameters" not in tags(c)]
        nbformat.write(conv.convert(nb, page), target)
        done.append(target)
    return done


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "pages", nargs="*", help="pages, e.g. 01_measure_view labs/01_measure_view (default: all)"
    )
    ap.add_argument("--root", type=Path, default=ROOT)
    ap.add_argument(
        "--out", type=Path, default=None, help="folder to write book/**.ipynb into (_build/colab)"
    )
    ap.add_argument(
        "--commit",
        default=None,
        help="the commit the setup cells install softlin at (default: git HEAD of --root)",
    )
    ap.add_argument(
        "--student",
        action="store_true",
        help="leave out every exercise solution (the student audience of Converter.convert): the "
        "notebooks of the colab-student branch, which the student edition of the site "
        "(tools/student_site.py) opens",
    )
    args = ap.parse_args(argv)
    root = args.root.resolve()
    out = (args.out or root / "_build" / "colab").resolve()
    conv = Converter(root, args.commit)
    if conv.commit is None:
        print("not a git checkout: the setup cells install softlin from main", file=sys.stderr)
    elif uncommitted_library(root):
        print(
            f"note: lib/ has uncommitted changes; the notebooks install softlin at {conv.commit[:12]}",
            file=sys.stderr,
        )
    for md in notebook_chapters(root):
        if args.pages and page_name(md) not in args.pages:
            continue
        page = page_of(md, root)
        source = nbformat.read(md.with_suffix(".ipynb"), as_version=4)
        try:
            nb = conv.convert(source, page, audience="student" if args.student else "colab")
        except (KeyError, ValueError) as exc:
            print(f"{page}: {exc}", file=sys.stderr)
            return 1
        target = out / f"{page}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, target)
        print(f"{target}: converted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
