"""What the tools record of the checkout that computed their results: git's answers about it, and the
header that every committed results file opens with (``tools/reference_values.py``,
``tools/paper_scale_references.py``; ``tools/paper_experiment.py`` records more, per run)."""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


def git(*args):
    """The standard output of ``git <args>`` run in this checkout, or None where git fails or is
    missing."""
    try:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    except OSError:
        return None
    return done.stdout if done.returncode == 0 else None


def results_header(script, doc):
    """The first entries of a results file: the first paragraph of the script's docstring ``doc``, the
    script's path ``script`` (from the checkout's root), the commit it ran at ("" outside git) and the
    versions of torch and Python."""
    return {
        "description": doc.split("\n\n")[0],
        "script": script,
        "commit": (git("rev-parse", "HEAD") or "").strip(),
        "torch": torch.__version__,
        "python": platform.python_version(),
    }
