#!/usr/bin/env python
"""Convert the chapter notebooks for plain Markdown front ends (Colab, GitHub, VS Code).

The paired ``book/NN_*.ipynb`` hold the book's MyST markup in their Markdown cells: ``{exercise}``,
``{solution}``, ``{prf:*}`` and admonition directives, and ``{numref}``, ``{ref}``, ``{doc}``,
``{prf:ref}`` and ``{cite}`` roles. Colab shows them as raw text. This tool writes a copy of each notebook
in which

* a theorem-like block, an exercise or an admonition becomes a bold title and a blockquote;
* a solution, a folded proof or a dropdown admonition becomes an HTML ``<details>`` block;
* ``{numref}`` becomes "Fig. 5.8", ``{ref}``, ``{prf:ref}`` and ``{doc}`` their target's title, each a
  link to its anchor on the book's site; ``{cite}`` the reference's authors and year, linked to the
  paper (DOI, arXiv) or to the site's references;
* a ``(label)=`` target becomes an HTML anchor.

Code cells are not changed. The MyST pairs stay the source; these copies are build products:

    python tools/colab_notebooks.py                      # _build/colab/book/*.ipynb
    python tools/colab_notebooks.py --out DIR 01_measure_view

The Pages workflow (``.github/workflows/book.yml``) writes them to the ``colab`` branch (main's tree with
``book/*.ipynb`` replaced), which the "Open in Colab" badge and the launch button open
(``repository.branch`` in ``_config.yml``), and into the site's ``colab/`` folder for download.
"""

from __future__ import annotations

import argparse
import copy
import re
import sys
from pathlib import Path

import nbformat
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_book import notebook_chapters, page_name, toc_files

ROOT = Path(__file__).resolve().parents[1]

# An opening fence (3+ backticks or colons) of a MyST directive, its name and argument.
FENCE = re.compile(r"^(?P<fence>`{3,}|:{3,})\{(?P<name>[a-zA-Z][\w:-]*)\}[ \t]*(?P<arg>[^\n]*)$")
ROLE = re.compile(r"\{(?P<role>[a-zA-Z][\w:-]*)\}`(?P<body>[^`]*)`")
TARGET = re.compile(r"^\((?P<label>[\w.-]+)\)=[ \t]*$", re.MULTILINE)
OPTION = re.compile(r"^:(?P<key>[\w-]+):[ \t]*(?P<value>[^\n]*)$")
#: What a reader of plain Markdown would still see of MyST: a directive fence or a role.
RAW_MYST = re.compile(r"^[ \t>]*(`{3,}|:{3,})\{[a-zA-Z]|\{[a-zA-Z][\w:-]*\}`", re.MULTILINE)

PRF_KINDS = {
    "theorem": "Theorem",
    "lemma": "Lemma",
    "proposition": "Proposition",
    "corollary": "Corollary",
    "definition": "Definition",
    "assumption": "Assumption",
    "remark": "Remark",
    "proof": "Proof",
    "example": "Example",
    "conjecture": "Conjecture",
}
ADMONITIONS = {"note", "tip", "warning", "important", "caution", "attention", "hint", "seealso"}


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
    stay text: :func:`convert_markdown` converts them recursively)."""
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


class Converter:
    """Converts the Markdown of the book's chapters, with an index of every label they define."""

    def __init__(self, root: Path = ROOT):
        self.root = root
        self.config = yaml.safe_load((root / "_config.yml").read_text())
        self.site = site_url(self.config)
        self.labels: dict[str, tuple[str, str]] = {}  # label -> (page, text)
        self.titles: dict[str, str] = {}  # page (book/NN_name) -> title
        self.references = self._references()
        self._index()

    # --- the index of labels -----------------------------------------------------------------------

    def _index(self) -> None:
        import jupytext

        numbered, chapter = self._numbered_pages(), 0
        for page in toc_files(self.root / "_toc.yml"):
            md = self.root / f"{page}.md"
            if not md.is_file():
                continue
            text = md.read_text()
            heading = re.search(r"^# (.+)$", text, re.MULTILINE)
            self.titles[page] = heading.group(1).strip() if heading else page
            if page in numbered:
                chapter += 1
            nb = jupytext.read(md) if "kernelspec" in text[:600] else None
            cells = nb.cells if nb else [nbformat.v4.new_markdown_cell(text)]
            figure = 0
            for cell in cells:
                fig = (cell.metadata.get("mystnb") or {}).get("figure") or {}
                if cell.cell_type == "code" and fig.get("name"):
                    figure += 1
                    self.labels[fig["name"]] = (page, f"Fig. {chapter}.{figure}")
                if cell.cell_type != "markdown":
                    continue
                for m in re.finditer(r"^\((?P<label>[\w.-]+)\)=\s*\n+#+ (?P<title>.+)$",
                                     cell.source, re.MULTILINE):  # fmt: skip
                    self.labels[m["label"]] = (page, m["title"].strip())
                self._index_directives(page, cell.source)

    def _index_directives(self, page: str, text: str) -> None:
        for block in parse_blocks(text):
            if isinstance(block, str):
                continue
            label, name = block["options"].get("label"), block["name"]
            if label:
                if name == "exercise":
                    self.labels[label] = (page, f"the exercise *{block['arg']}*")
                elif name.startswith("prf:"):
                    kind = PRF_KINDS.get(name[4:], name[4:].title())
                    self.labels[label] = (page, block["arg"] or kind)
            self._index_directives(page, block["body"])

    def _numbered_pages(self) -> set[str]:
        toc = yaml.safe_load((self.root / "_toc.yml").read_text())
        return {
            c["file"]
            for part in toc.get("parts", [])
            if part.get("numbered")
            for c in part["chapters"]
        }

    def _references(self) -> dict[str, str]:
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
                    else f.get("url") or f"{self.site}book/references.html"
                )
                out[key] = f"[{who} ({f.get('year', 'n.d.')})]({link})"
        return out

    # --- conversion ----------------------------------------------------------------------------------

    def link(self, label: str, text: str | None = None) -> str:
        if label not in self.labels:
            raise KeyError(f"unknown label {label!r} (not in any page of _toc.yml)")
        page, title = self.labels[label]
        return f"[{text or title}]({self.site}{page}.html#{label})"

    def role(self, m: re.Match, page: str) -> str:
        role, body = m["role"], m["body"]
        explicit = re.fullmatch(r"(?P<text>.+?)\s*<(?P<target>[^<>]+)>", body, re.DOTALL)
        text, target = (explicit["text"], explicit["target"]) if explicit else (None, body)
        if role == "cite":
            keys = [k.strip() for k in target.split(",")]
            missing = [k for k in keys if k not in self.references]
            if missing:
                raise KeyError(f"{page}: no reference {missing} in the bibliography")
            return "; ".join(self.references[k] for k in keys)
        if role == "doc":
            folder = page.rsplit("/", 1)[0]
            doc = target if "/" in target else f"{folder}/{target}"
            return f"[{text or self.titles.get(doc, target)}]({self.site}{doc}.html)"
        if role in ("ref", "numref", "prf:ref", "eq"):
            return self.link(target, text)
        raise ValueError(f"{page}: no plain-Markdown form for the role {{{role}}}")

    def convert_markdown(self, text: str, page: str) -> str:
        parts = []
        for block in parse_blocks(text):
            if isinstance(block, str):
                parts.append(block)
                continue
            parts.append(self.directive(block, page))
        out = "\n".join(parts)
        out = TARGET.sub(lambda m: f'<a id="{m["label"]}"></a>', out)
        return ROLE.sub(lambda m: self.role(m, page), out)

    def directive(self, block: dict, page: str) -> str:
        name, arg, options = block["name"], block["arg"], block["options"]
        body = self.convert_markdown(block["body"], page)
        folded = "dropdown" in options.get("class", "").split()
        if name == "exercise":
            return f"**Exercise: {arg}**\n\n{quote(body)}"
        if name == "solution":
            return details("Solution", body)
        if name.startswith("prf:"):
            kind = PRF_KINDS.get(name[4:], name[4:].title())
            title = f"{kind}: {arg}" if arg and not arg.startswith(kind) else arg or kind
            if name == "prf:proof":
                return details(title, body) if folded else f"**{title}.** {body.strip()}"
            return f"**{title}**\n\n{quote(body)}"
        if name == "admonition" or name in ADMONITIONS or name == "dropdown":
            title = arg or name.title()
            if folded or name == "dropdown":
                return details(title, body)
            return f"**{title}**\n\n{quote(body)}"
        raise ValueError(f"{page}: no plain-Markdown form for the directive {{{name}}}")

    def convert(self, nb, page: str):
        """A copy of the notebook ``nb`` (of ``page``, e.g. ``book/01_measure_view``), converted."""
        nb = copy.deepcopy(nb)
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                cell.source = self.convert_markdown(cell.source, page)
        return nb


def raw_myst(text: str) -> list[str]:
    """The MyST constructs (directive fences, roles) left in Markdown ``text``."""
    return [m.group(0) for m in RAW_MYST.finditer(text)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("chapters", nargs="*", help="chapter stems (default: every chapter)")
    ap.add_argument("--root", type=Path, default=ROOT)
    ap.add_argument(
        "--out", type=Path, default=None, help="folder to write book/*.ipynb into (_build/colab)"
    )
    args = ap.parse_args(argv)
    root = args.root.resolve()
    out = (args.out or root / "_build" / "colab").resolve()
    conv = Converter(root)
    for md in notebook_chapters(root):
        if args.chapters and page_name(md) not in args.chapters:
            continue
        page = md.relative_to(root).with_suffix("").as_posix()
        nb = conv.convert(nbformat.read(md.with_suffix(".ipynb"), as_version=4), page)
        left = raw_myst("\n".join(c.source for c in nb.cells if c.cell_type == "markdown"))
        if left:
            print(f"{page}: MyST left after conversion: {left[:5]}", file=sys.stderr)
            return 1
        target = out / f"{page}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, target)
        print(f"{target}: converted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
