"""ruff owns the layout of lib/, tools/, tests/ and bench/ (pyproject.toml: 100 columns, the rule set and
the reason for each choice): a stray reformat or a lint finding fails ``make test``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ["lib", "tools", "tests", "bench"]


def _ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args, *FOLDERS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize(
    "args", [("format", "--check", "--diff"), ("check", "--no-fix")], ids=["format", "check"]
)
def test_ruff_passes(args):
    proc = _ruff(*args)
    assert proc.returncode == 0, f"ruff {' '.join(args)} failed:\n{proc.stdout}{proc.stderr}"[
        -6000:
    ]
