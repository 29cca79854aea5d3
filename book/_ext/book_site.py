"""Small site additions and fixes for the book (a local Sphinx extension).

1. An "Open in Colab" badge under the title of every notebook page. It links to the chapter's paired
   ``.ipynb`` on the repository's branch, built from ``_config.yml`` alone (``repository.url``,
   ``repository.branch``, ``repository.path_to_book``, ``launch_buttons.colab_url``), like the theme's
   launch button. The badge is inline SVG with a text label: no image download, the same offline.
2. The precomputed explorers move on the static page: ``static/softlin-explorer.js`` swaps the pictures
   that ``softlin.book.widgets.explorer`` drew when the chapter was executed (the kernels get
   ``SOFTLIN_STATIC_EXPLORERS=1``, also when Sphinx executes a notebook itself, ``jupyter-book build .``).
3. ``static/book_site.css``: a wider column, the explorers' controls, dark-mode backgrounds for figures,
   and the print style of the handouts (``tools/handouts.py``).
4. A ``{prf:proof}`` with ``:class: dropdown`` has no title, so sphinx-togglebutton crashed on it (and
   left every later dropdown of the page open); such proofs get a "Proof" title and a unique id.
6. The ``softlin-api`` directive of the API page (``book/api.md``): one line per module gives its section, the
   module docstring, a summary table of its ``__all__`` and every public name with its docstring (Sphinx
   autodoc, numpydoc sections read by napoleon). A name re-exported from another listed module (the top
   level re-exports ``softlin.attention`` and ``softlin.measures``) is documented there once, and linked.
7. ``static/softlin-reader.js``: a solution opens from a click anywhere on its title; a figure opens full
   size on a click or tap; a display equation or printed output wider than the column is scaled to fit
   (to 70-75 %), then scrolls in its own box. The theme's ``fontawesome.js`` (1.49 MB) is dropped from
   every page: the icons come from Font Awesome's CSS and web fonts (``book/_vendor/fontawesome``). The
   badge line also links to the paper on arXiv.
5. sphinx-thebe registers its configuration script twice ("Identifier 'THEBE_JS_URL' has already been
   declared"); duplicate scripts are dropped from each page.
8. The PNG figures of the site (``_images/``) are re-encoded with a palette of at most 256 colours
   (Pillow's max-coverage quantiser, no dithering), about 3.5x smaller, when that moves no pixel by
   more than ``PALETTE_MAX_ERROR`` levels of 255 and the picture is opaque; otherwise losslessly
   recompressed. The pixel size (the lightbox's full size) and the resolution stay as drawn.

Enabled from ``_config.yml`` (``sphinx: local_extensions: {book_site: book/_ext}``).
"""

from __future__ import annotations

import os
import re
from html import escape
from pathlib import Path

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

BADGE = """<p class="colab-badge-line"><a class="colab-badge reference external" href="{url}"
 title="Open this chapter's notebook in Google Colab" target="_blank" rel="noopener">
<svg xmlns="http://www.w3.org/2000/svg" width="117" height="20" viewBox="0 0 117 20" role="img"
 aria-label="Open in Colab"><title>Open in Colab</title>
<rect width="117" height="20" rx="3" fill="#555"/><rect x="51" width="66" height="20" rx="3" fill="#E37400"/>
<rect x="51" width="4" height="20" fill="#E37400"/>
<g fill="#fff" font-family="Verdana,DejaVu Sans,sans-serif" font-size="11" text-anchor="middle">
<text x="26" y="14">Open in</text><text x="84" y="14">Colab</text></g></svg></a>
<span class="paper-link">The paper: Boursier &amp; Boyer, <a class="reference external"
 href="https://arxiv.org/abs/2512.11784">arXiv:2512.11784</a> (December 2025; ICML 2026)</span></p>"""

#: The theme's 1.49 MB icon script; the icons come from Font Awesome's CSS and web fonts instead
#: (``tools/fetch_vendor.py`` puts them in ``book/_vendor/fontawesome``).
FONTAWESOME_JS = re.compile(
    r'<script[^>]*src="[^"]*_static/scripts/fontawesome\.js[^"]*"[^>]*></script>\s*'
)
FONTAWESOME_CSS = ["fontawesome.min.css", "solid.min.css", "regular.min.css", "brands.min.css"]


def colab_url(config, docname: str) -> str | None:
    """The Colab URL of ``docname``'s paired notebook, or None when the config names no GitHub repo."""
    opts = config.html_theme_options
    repo = (opts.get("repository_url") or "").rstrip("/")
    colab = (opts.get("launch_buttons", {}) or {}).get("colab_url", "").rstrip("/")
    if "github.com/" not in repo or not colab:
        return None
    org, name = repo.split("github.com/", 1)[1].split("/")[:2]
    branch = opts.get("repository_branch") or "main"
    prefix = (opts.get("path_to_docs") or "").strip("/")
    path = f"{prefix}/{docname}.ipynb" if prefix else f"{docname}.ipynb"
    return f"{colab}/github/{org}/{name}/blob/{branch}/{path}"


def is_notebook(app, docname: str) -> bool:
    if "kernelspec" in app.env.metadata.get(docname, {}):
        return True
    return Path(str(app.env.doc2path(docname))).suffix == ".ipynb"


def add_badge(app, doctree, docname):
    if app.builder.format != "html" or not is_notebook(app, docname):
        return
    url = colab_url(app.config, docname)
    if url is None:
        return
    for section in doctree.findall(nodes.section):
        title = next(iter(section.findall(nodes.title)), None)
        if title is not None:
            section.insert(
                section.index(title) + 1,
                nodes.raw("", BADGE.format(url=escape(url, quote=True)), format="html"),
            )
            return


def title_dropdown_proofs(app, doctree):
    """Give every dropdown proof a "Proof" title (the "Proof. " lead-in moves into it) and its own id."""
    for n, adm in enumerate(doctree.findall(nodes.admonition)):
        classes = adm.get("classes", [])
        if (
            "proof" not in classes
            or "dropdown" not in classes
            or any(isinstance(c, nodes.title) for c in adm)
        ):
            continue
        first = next(iter(adm.findall(nodes.Text)), None)
        if first is not None and first.astext().startswith("Proof. "):
            first.parent.replace(first, nodes.Text(first.astext()[len("Proof. ") :]))
        adm.insert(0, nodes.title("", "Proof"))
        adm["ids"] = [i for i in adm["ids"] if i != "proof"] or [f"proof-{n}"]


def drop_duplicate_scripts(app, pagename, templatename, context, doctree):
    seen, unique = set(), []
    for js in context.get("script_files", []):
        key = (
            getattr(js, "filename", str(js)) or "",
            tuple(sorted(getattr(js, "attributes", {}).items())),
        )
        if key not in seen:
            seen.add(key)
            unique.append(js)
    if "script_files" in context:
        context["script_files"][:] = unique


class SoftlinApi(SphinxDirective):
    """``.. softlin-api::`` with one module name per line of content (inside ``{eval-rst}`` in MyST)."""

    has_content = True

    def run(self):
        import importlib

        from docutils.statemachine import StringList
        from sphinx.util.nodes import nested_parse_with_titles

        listed = [line.strip() for line in self.content if line.strip()]
        lines = []
        for name in listed:
            module = importlib.import_module(name)
            public = list(getattr(module, "__all__", []))
            home = {n: getattr(getattr(module, n), "__module__", name) for n in public}
            home = {n: (m if m in listed else name) for n, m in home.items()}
            lines += [
                f"``{name}``",
                "-" * (len(name) + 4),
                "",
                f".. automodule:: {name}",
                "   :no-members:",
                "",
            ]
            if public:
                lines += [
                    ".. currentmodule:: None",
                    "",
                    ".. autosummary::",
                    "   :nosignatures:",
                    "",
                ]
                lines += [f"   ~{home[n]}.{n}" for n in public] + [""]
            for n in public:
                if home[n] != name:
                    continue
                obj = getattr(module, n)
                if isinstance(obj, type):
                    lines += [
                        f".. autoclass:: {name}.{n}",
                        "   :members:",
                        "   :show-inheritance:",
                        "",
                    ]
                elif callable(obj):
                    lines += [f".. autofunction:: {name}.{n}", ""]
                else:
                    lines += [f".. autodata:: {name}.{n}", "   :no-value:", ""]
        node = nodes.section()
        node.document = self.state.document
        nested_parse_with_titles(self.state, StringList(lines, source="softlin-api"), node)
        return node.children


def drop_fontawesome_js(app, exception):
    """Remove the theme's icon script from every page and the site (the icons are a web font)."""
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    for page in out.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        if "fontawesome.js" in text:
            page.write_text(FONTAWESOME_JS.sub("", text), encoding="utf-8")
    for name in ("fontawesome.js", "fontawesome.js.map", "fontawesome.js.LICENSE.txt"):
        (out / "_static" / "scripts" / name).unlink(missing_ok=True)


#: The most a palette re-encoding may move a pixel's channel (of 255) for a figure to be served with it.
PALETTE_MAX_ERROR = 16


def slim_png(path: Path) -> tuple[int, int]:
    """Re-encode one PNG figure smaller (see 8. above); return (bytes before, bytes after)."""
    import io

    import numpy as np
    from PIL import Image

    raw = path.read_bytes()
    with Image.open(io.BytesIO(raw)) as img:
        img.load()
    if img.mode == "P":  # already a palette (re-run on a kept output): nothing to gain
        return len(raw), len(raw)
    keep = {"dpi": img.info["dpi"]} if "dpi" in img.info else {}
    pixels = np.asarray(img)
    opaque = img.mode in ("RGB", "L") or (img.mode == "RGBA" and pixels[..., 3].min() == 255)
    best = raw
    candidates = []
    if opaque and img.mode != "L":
        rgb = img.convert("RGB")
        pal = rgb.quantize(256, method=Image.Quantize.MAXCOVERAGE, dither=Image.Dither.NONE)
        err = np.abs(np.asarray(pal.convert("RGB"), dtype=np.int16) - np.asarray(rgb, np.int16))
        if err.max() <= PALETTE_MAX_ERROR:
            candidates.append(pal)
        candidates.append(rgb)  # the alpha channel of an opaque figure carries nothing
    candidates.append(img)
    for candidate in candidates:
        buf = io.BytesIO()
        candidate.save(buf, format="png", optimize=True, **keep)
        if len(buf.getvalue()) < len(best):
            best = buf.getvalue()
    if best is not raw:
        path.write_bytes(best)
    return len(raw), len(best)


def slim_figures(app, exception):
    """Re-encode every PNG of the site's ``_images/`` (the cells' figures) smaller."""
    if exception is not None or app.builder.format != "html":
        return
    for png in sorted((Path(app.outdir) / "_images").glob("*.png")):
        slim_png(png)


def _add_static(app):
    app.config.html_static_path.append(str(Path(__file__).parent / "static"))


#: A lab's page name (``book/labs/NN_name``): its numbered blocks are numbered "L{N}.k".
LAB_DOC = re.compile(r"^book/labs/(\d\d)_")


def lab_section_number(docname: str) -> tuple[str, ...] | None:
    """The number a lab's figures and other numbered blocks carry before their own: ``("L2",)`` for
    ``book/labs/02_name`` (lab 2, beside lesson 2, whose figures are "Fig. 2.k"); None for other pages.
    ``tools/colab_notebooks.py`` (``lab_number``) numbers the labs' notebooks with this function."""
    m = LAB_DOC.match(docname)
    return (f"L{int(m[1])}",) if m else None


def number_lab_blocks(app, env):
    """Number each lab's figures (and remarks, exercises) on their own, "Fig. L2.1", "Fig. L2.2", ...:
    the labs' part of the table of contents is unnumbered, so Sphinx numbers their blocks in one run
    across every lab (Fig. 1 to 16). Runs after Sphinx assigns the numbers (``env-get-updated``), keeping
    its order on each page; references (``numref``) read the same table."""
    for docname, by_type in env.toc_fignumbers.items():
        secnum = lab_section_number(docname)
        if secnum is None:
            continue
        for ids in by_type.values():
            ordered = sorted(ids, key=lambda node_id: ids[node_id])  # document order
            for k, node_id in enumerate(ordered, 1):
                ids[node_id] = (*secnum, k)
    return []


def setup(app):
    app.connect("env-get-updated", number_lab_blocks, priority=900)
    app.connect("doctree-read", title_dropdown_proofs)
    app.connect("doctree-resolved", add_badge)
    app.connect("html-page-context", drop_duplicate_scripts, priority=900)
    app.add_directive("softlin-api", SoftlinApi)
    app.connect("builder-inited", _add_static)
    app.add_css_file("book_site.css")
    app.add_js_file("softlin-explorer.js")
    app.add_js_file("softlin-reader.js")
    for css in FONTAWESOME_CSS:
        app.add_css_file(f"fontawesome/css/{css}")
    app.connect("build-finished", drop_fontawesome_js)
    app.connect("build-finished", slim_figures)
    # The explorers' static-frame builder (static_explorer.py, beside this file) for those kernels.
    here = str(Path(__file__).resolve().parent)
    if here not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(
            filter(None, [here, os.environ.get("PYTHONPATH")])
        )
    # Kernels that Sphinx itself starts (a direct `jupyter-book build .`) inherit this environment.
    os.environ.setdefault("SOFTLIN_STATIC_EXPLORERS", "1")
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
