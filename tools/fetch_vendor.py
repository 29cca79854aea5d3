#!/usr/bin/env python
"""Fetch the JavaScript the site serves itself (no CDN) into ``book/_vendor/``.

* MathJax 3.2.2 (typesets the math), as separate components that ``startup.js`` loads (``loader.load``
  in ``_config.yml``): the core, TeX input, CommonHTML output with its TeX font data, the assistive
  MathML that screen readers read, the CHTML woff-v2 fonts and the TeX extensions loaded on demand.
  Not the combined ``tex-mml-chtml.js`` (1.17 MB): of its weight the book needs no MathML input and
  no context menu (``ui/menu``, 0.43 MB), so a page loads about 0.41 MB less.
* Font Awesome Free 6.5.2, its CSS and woff2 web fonts (the theme's icons, served without the theme's
  1.49 MB ``fontawesome.js``).
* reveal.js 6.0.2, the slide decks of the lessons (``tools/slides.py``): the core script and stylesheet,
  the white theme and the speaker-notes plugin (about 0.8 MB; the decks open offline and print to PDF).

No widget manager is vendored: no page holds ipywidgets state (the explorers are precomputed pictures,
``softlin.book.widgets``), so the site loads no widget JavaScript (``nb_ipywidgets_js: {}``).

The packages come from the npm registry with ``npm pack`` (exact versions); each tarball's SHA-256 is
checked against the pin below before anything is extracted. Tarballs are cached in
``$XDG_CACHE_HOME/softlin-book/vendor`` (default ``~/.cache/...``), so a rerun, or a rebuild after
``make clean``, needs no network. ``book/_vendor/VENDOR.json`` records what was installed; when it matches
the pins nothing is done.

``_config.yml`` points at these files (``html_static_path: [book/_vendor]``, ``mathjax_path``);
``tools/build_book.py`` calls :func:`ensure` before every build. Usage::

    python tools/fetch_vendor.py            # install when missing or outdated
    python tools/fetch_vendor.py --force    # reinstall from the cache (fetching what is missing)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENDOR = ROOT / "book" / "_vendor"

# name@version -> (sha256 of the npm tarball, [(path inside the tarball, destination under _vendor)])
# A path ending in "/" copies that directory; a destination ending in "/" keeps the file name.
PACKAGES = {
    "mathjax@3.2.2": (
        "1b9c0a1c44df864e915690558e72adb9cc5203360daefd385084ced3b6c64c09",
        [
            ("package/LICENSE", "mathjax/LICENSE"),
            ("package/es5/startup.js", "mathjax/"),
            ("package/es5/core.js", "mathjax/"),
            ("package/es5/input/tex.js", "mathjax/input/"),
            ("package/es5/output/chtml.js", "mathjax/output/"),
            ("package/es5/output/chtml/fonts/tex.js", "mathjax/output/chtml/fonts/"),
            ("package/es5/a11y/assistive-mml.js", "mathjax/a11y/"),
            ("package/es5/output/chtml/fonts/woff-v2/", "mathjax/output/chtml/fonts/woff-v2/"),
            ("package/es5/input/tex/extensions/", "mathjax/input/tex/extensions/"),
        ],
    ),
    # The theme's icons as a web font (about 0.4 MB) instead of its 1.49 MB fontawesome.js, which
    # book/_ext/book_site.py drops from every page.
    "@fortawesome/fontawesome-free@6.5.2": (
        "1622d514686c299db3ffe9405c4f124778ce812658f66282d4524247e66fff9c",
        [
            ("package/LICENSE.txt", "fontawesome/LICENSE.txt"),
            ("package/css/fontawesome.min.css", "fontawesome/css/"),
            ("package/css/solid.min.css", "fontawesome/css/"),
            ("package/css/regular.min.css", "fontawesome/css/"),
            ("package/css/brands.min.css", "fontawesome/css/"),
            ("package/webfonts/fa-solid-900.woff2", "fontawesome/webfonts/"),
            ("package/webfonts/fa-regular-400.woff2", "fontawesome/webfonts/"),
            ("package/webfonts/fa-brands-400.woff2", "fontawesome/webfonts/"),
        ],
    ),
    # The lessons' slide decks (tools/slides.py, served from the site's _static/revealjs): the core, its
    # stylesheet, the white theme (its fonts are inlined in the CSS, nothing fetched) and the speaker
    # notes plugin (its speaker view is inlined in the script).
    "reveal.js@6.0.2": (
        "2f0c20bfb02447a198a1ebe8a8c097a5437d035caa38f2820bf4ba887a3eac91",
        [
            ("package/LICENSE", "revealjs/LICENSE"),
            ("package/dist/reveal.js", "revealjs/"),
            ("package/dist/reveal.css", "revealjs/"),
            ("package/dist/theme/white.css", "revealjs/theme/"),
            ("package/dist/plugin/notes.js", "revealjs/plugin/"),
        ],
    ),
}


# Files of our own written into _vendor beside the packages (name -> text); none at present.
OWN_FILES: dict[str, str] = {}


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "softlin-book" / "vendor"


def tarball_name(spec: str) -> str:
    """npm pack's file name: ``@scope/name@1.2.3`` -> ``scope-name-1.2.3.tgz``."""
    name, version = spec.rsplit("@", 1)
    return f"{name.lstrip('@').replace('/', '-')}-{version}.tgz"


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch(spec: str, digest: str, cache: Path) -> Path:
    """The verified tarball of ``spec`` in ``cache``, running ``npm pack`` when it is not there yet."""
    cache.mkdir(parents=True, exist_ok=True)
    tgz = cache / tarball_name(spec)
    if tgz.exists() and sha256(tgz) == digest:
        return tgz
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit(
            f"fetch_vendor: {spec} is not in the cache ({cache}) and `npm` is not installed; "
            "install Node.js/npm (e.g. `apt-get install -y npm`) or copy the tarball there"
        )
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            [npm, "pack", spec, "--silent", "--pack-destination", tmp],
            capture_output=True,
            text=True,
            check=False,
        )
        got = Path(tmp) / tarball_name(spec)
        if proc.returncode != 0 or not got.exists():
            raise SystemExit(
                f"fetch_vendor: `npm pack {spec}` failed (rc={proc.returncode}):\n"
                f"{proc.stdout}{proc.stderr}"
            )
        actual = sha256(got)
        if actual != digest:
            raise SystemExit(
                f"fetch_vendor: {spec} has SHA-256 {actual}, expected {digest}; refusing it"
            )
        shutil.move(str(got), tgz)
    return tgz


def extract(tgz: Path, files: list[tuple[str, str]], dest: Path) -> int:
    """Copy the listed members of ``tgz`` under ``dest``; return the number of files written."""
    import fnmatch

    n = 0
    with tarfile.open(tgz, "r:gz") as tar:
        members = [m for m in tar.getmembers() if m.isfile()]
        for src, dst in files:
            if src.endswith("/"):
                chosen = [(m, dst + m.name[len(src) :]) for m in members if m.name.startswith(src)]
            elif "*" in src:
                folder, pattern = src.rsplit("/", 1)
                chosen = [
                    (m, dst + Path(m.name).name)
                    for m in members
                    if str(Path(m.name).parent) == folder
                    and fnmatch.fnmatch(Path(m.name).name, pattern)
                ]
            else:
                chosen = [
                    (m, dst + Path(m.name).name if dst.endswith("/") else dst)
                    for m in members
                    if m.name == src
                ]
            if not chosen:
                raise SystemExit(f"fetch_vendor: {tgz.name} has no {src!r}")
            for member, rel in chosen:
                if ".." in Path(rel).parts:
                    raise SystemExit(f"fetch_vendor: refusing path {rel!r} from {tgz.name}")
                out = dest / rel
                out.parent.mkdir(parents=True, exist_ok=True)
                with tar.extractfile(member) as fsrc, out.open("wb") as fdst:
                    shutil.copyfileobj(fsrc, fdst)
                n += 1
    return n


def wanted() -> dict:
    """What ``VENDOR.json`` records: each package's digest and the files taken from it (so that a
    changed file list also re-extracts), and the digest of each of our own files."""
    out = {
        spec: f"{digest} files:{hashlib.sha256(json.dumps(files).encode()).hexdigest()[:16]}"
        for spec, (digest, files) in PACKAGES.items()
    }
    out.update(
        {name: hashlib.sha256(text.encode()).hexdigest() for name, text in OWN_FILES.items()}
    )
    return out


def is_current(dest: Path = VENDOR) -> bool:
    stamp = dest / "VENDOR.json"
    try:
        return json.loads(stamp.read_text()).get("packages") == wanted()
    except (OSError, ValueError):
        return False


def ensure(dest: Path = VENDOR, *, force: bool = False, quiet: bool = False) -> Path:
    """Make ``dest`` hold exactly the pinned vendored files; return ``dest``."""
    if not force and is_current(dest):
        return dest
    cache = cache_dir()
    tarballs = {spec: fetch(spec, digest, cache) for spec, (digest, _) in PACKAGES.items()}
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    counts = {spec: extract(tarballs[spec], files, tmp) for spec, (_, files) in PACKAGES.items()}
    for name, text in OWN_FILES.items():
        (tmp / name).write_text(text)
        counts[name] = 1
    (tmp / "VENDOR.json").write_text(
        json.dumps({"packages": wanted(), "files": counts}, indent=1) + "\n"
    )
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    if not quiet:
        size = sum(p.stat().st_size for p in dest.rglob("*") if p.is_file())
        print(
            f"fetch_vendor: {sum(counts.values())} files ({size / 2**20:.1f} MiB) in {dest}",
            flush=True,
        )
    return dest


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--force", action="store_true", help="reinstall even when book/_vendor is current"
    )
    ap.add_argument("--dest", type=Path, default=VENDOR)
    args = ap.parse_args(argv)
    ensure(args.dest, force=args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
