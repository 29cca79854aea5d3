"""Shared fixtures.

The gate (``make test``) executes the book twice, once per session each:

* ``fast_run``: every chapter in ``fast`` mode with papermill only (no site), with every exercise
  self-check also tried on its folded solution and on a wrong answer (``--exercise-checks``);
* ``built_book``: every chapter in ``default`` mode, the mode the published site shows, and the site built
  with ``-W``; the browser tests (test_site.py) check that site.

``make_book`` writes a small book of fixture chapters (tests/fixtures/) with the real ``_config.yml``, for
the tests of the build machinery itself.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(ROOT / "tools"))

# Where the test builds go; SOFTLIN_TEST_STAGE / SOFTLIN_TEST_FAST_STAGE override them.
STAGE = Path(os.environ.get("SOFTLIN_TEST_STAGE", ROOT / "_build" / "test-stage")).resolve()
FAST_STAGE = Path(
    os.environ.get("SOFTLIN_TEST_FAST_STAGE", ROOT / "_build" / "test-fast")
).resolve()


def run_build(*args: str, stage: Path) -> tuple[int, str, Path, float]:
    """Run tools/build_book.py; return (returncode, combined output, stage, seconds)."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "build_book.py"), *args, "--stage", str(stage)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.returncode, proc.stdout + proc.stderr, stage, time.perf_counter() - t0


def reuse(stage: Path, marker: str) -> bool:
    """SOFTLIN_REUSE_STAGE=1 reuses a finished test build (for iterating on the tests themselves)."""
    return os.environ.get("SOFTLIN_REUSE_STAGE") == "1" and (stage / marker).exists()


@pytest.fixture(scope="session")
def built_book():
    """Execute every chapter in default mode (two at a time) and build the site with -W.

    Returns (returncode, combined output, stage path)."""
    if reuse(STAGE, "_build/html/index.html"):
        return 0, "reused", STAGE
    rc, log, stage, _ = run_build("--mode", "default", "-j", "2", stage=STAGE)
    return rc, log, stage


@pytest.fixture(scope="session")
def fast_run():
    """Execute every chapter in fast mode with the exercise harness (papermill only, no site).

    Returns (returncode, combined output, stage path)."""
    if reuse(FAST_STAGE, "status.json"):
        return 0, "reused", FAST_STAGE
    rc, log, stage, _ = run_build(
        "--mode", "fast", "-j", "2", "--no-html", "--exercise-checks", stage=FAST_STAGE
    )
    return rc, log, stage


def make_book(root: Path, chapters: list[str], extra_pages: dict[str, str] | None = None) -> Path:
    """A book at ``root`` with the real ``_config.yml``, its intro page and the fixture chapters named
    ``chapters`` (files of tests/fixtures/, copied into ``book/``), in that order."""
    (root / "book").mkdir(parents=True, exist_ok=True)
    shutil.copy2(ROOT / "_config.yml", root / "_config.yml")
    shutil.copy2(ROOT / "book" / "references.bib", root / "book" / "references.bib")
    (root / "book" / "intro.md").write_text(
        "# Fixture book\n\nA small book for the tests of the build.\n"
    )
    for name in chapters:
        shutil.copy2(FIXTURES / name, root / "book" / name)
    for name, text in (extra_pages or {}).items():
        (root / "book" / name).write_text(text)
    toc = {
        "format": "jb-book",
        "root": "book/intro",
        "chapters": [{"file": "book/" + Path(n).stem} for n in [*chapters, *(extra_pages or {})]],
    }
    (root / "_toc.yml").write_text(yaml.safe_dump(toc, sort_keys=False))
    return root


def run_with_library_only(script: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run the Python file ``script`` in ``cwd`` with only lib/ on the path, as a wheel install gives
    a lecturer who has the built kit and not the repository (no tools/, no course/)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSTARTUP")}
    env["PYTHONPATH"] = str(ROOT / "lib")
    return subprocess.run(
        [sys.executable, script, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def chromium_path() -> str:
    """Debian's Chromium, installed with apt-get when missing (CI runs as root on Debian); a GitHub
    runner's preinstalled Google Chrome also works."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    if os.geteuid() == 0 and shutil.which("apt-get"):
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env, capture_output=True)
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", "chromium"],
            check=True,
            env=env,
            capture_output=True,
        )
        found = shutil.which("chromium")
        if found:
            return found
    pytest.fail(
        "headless Chromium is needed: install Debian's `chromium` (apt-get install -y chromium)"
    )


# Every browser test launches Chromium with these: no sandbox (CI runs as root), no GPU, and shared
# memory in /tmp rather than /dev/shm, which a container may keep small.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]

# The tallest tile one screenshot captures, in CSS pixels. One full-page capture of a very tall page
# (the API page is about 57 000 px at 1280 px wide) crashed Chromium's renderer on a CI machine
# ("Target crashed"); tiles bound the size of each capture.
SHOT_TILE_PX = 8_000


def shoot(page, path: Path) -> list[Path]:
    """Screenshot the whole of ``page`` from its top, in tiles at most ``SHOT_TILE_PX`` tall:
    ``path``, then ``NAME-2.png``, ``NAME-3.png``, ... Returns the files written."""
    height = page.evaluate("() => Math.ceil(document.documentElement.scrollHeight)")
    width = page.viewport_size["width"]
    written = []
    for k, top in enumerate(range(0, max(height, 1), SHOT_TILE_PX)):
        tile = path if k == 0 else path.with_name(f"{path.stem}-{k + 1}{path.suffix}")
        clip = {"x": 0, "y": top, "width": width, "height": min(SHOT_TILE_PX, max(height - top, 1))}
        page.screenshot(path=str(tile), full_page=True, clip=clip)
        written.append(tile)
    return written


@pytest.fixture
def gen():
    return __import__("torch").Generator().manual_seed(1234)


@pytest.fixture(scope="module")
def offline_page(built_book):
    """A headless Chromium page at 1280 x 900 on the built site, every http(s) and ws(s) request
    refused: (page, the site's html folder, the URLs it requested)."""
    import re

    from playwright.sync_api import sync_playwright

    rc, log, stage = built_book
    assert rc == 0, log[-3000:]
    requests: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.route(re.compile(r"^(https?|wss?)://"), lambda route: route.abort())
        page = context.new_page()
        page.on("request", lambda r: requests.append(r.url))
        yield page, stage / "_build" / "html", requests
        browser.close()
