"""Shared fixtures. The fast-mode book is executed and built once per test session (``built_book``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

# Where the fast-mode test build goes; SOFTLIN_TEST_STAGE overrides it (e.g. to reuse a stage built by hand).
STAGE = Path(os.environ.get("SOFTLIN_TEST_STAGE", ROOT / "_build" / "test-stage")).resolve()


@pytest.fixture(scope="session")
def built_book():
    """Execute every chapter in fast mode with papermill and build the site with -W.

    Returns (returncode, combined output, stage path). Set SOFTLIN_REUSE_STAGE=1 to reuse an existing
    successful test stage (for iterating on the site tests).
    """
    html = STAGE / "_build" / "html" / "index.html"
    if os.environ.get("SOFTLIN_REUSE_STAGE") == "1" and html.exists():
        return 0, "reused", STAGE
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "build_book.py"), "--mode", "fast", "-j", "2", "--stage", str(STAGE)],
        cwd=ROOT, capture_output=True, text=True,
    )
    return proc.returncode, proc.stdout + proc.stderr, STAGE


@pytest.fixture
def gen():
    return __import__("torch").Generator().manual_seed(1234)
