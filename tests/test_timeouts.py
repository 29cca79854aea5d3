"""A hung cell fails the build fast, naming the chapter and the cell; real cells stay well inside the limit.

The per-mode cell timeout (``tools/build_book.py: CELL_TIMEOUT``) is the slowest real cell of that mode
times ``MARGIN``, rounded up, and at most about 4.5 minutes, so that a hang fails ``make book`` (and
``make test``) within 5 minutes. These tests keep both halves of that true: every executed cell of the
gate's two runs (fast and default) must stay ``MARGIN`` times below its mode's limit, and a fixture chapter
whose cell sleeps for an hour must fail the build at the timeout with a message naming it.
"""

from __future__ import annotations

import json
import time

import pytest
from build_book import CELL_TIMEOUT, MARGIN
from conftest import make_book, run_build

pytestmark = pytest.mark.book

KERNEL_OVERHEAD = (
    30  # seconds: kernel start, the cells before the hang, shutdown (measured: about 5-10 s)
)


@pytest.mark.parametrize("mode", ["fast", "default"])
def test_a_hang_fails_within_five_minutes_in_fast_and_default_mode(mode):
    assert CELL_TIMEOUT[mode] + KERNEL_OVERHEAD <= 300, CELL_TIMEOUT


@pytest.mark.parametrize("run, mode", [("fast_run", "fast"), ("built_book", "default")])
def test_the_slowest_cell_stays_within_the_margin(run, mode, request):
    _rc, _, stage = request.getfixturevalue(run)
    status = json.loads((stage / "status.json").read_text())
    slowest = sorted(
        (
            (r["slowest_cell"][0], r["chapter"], r["slowest_cell"][1], r["slowest_cell"][2])
            for r in status["chapters"]
            if r.get("slowest_cell")
        ),
        reverse=True,
    )
    print(
        f"\n{mode} mode, timeout {CELL_TIMEOUT[mode]} s; slowest cells:",
        *[f"  {s:6.1f} s  {ch} cell {i}: {line}" for s, ch, i, line in slowest],
        sep="\n",
    )
    assert slowest, "no cell durations were recorded"
    seconds, chapter, index, line = slowest[0]
    assert seconds * MARGIN <= CELL_TIMEOUT[mode], (
        f"{chapter} cell {index} ({line!r}) took {seconds:.1f} s in {mode} mode: more than 1/{MARGIN} of the "
        f"{CELL_TIMEOUT[mode]} s cell timeout. Make the cell faster, or raise CELL_TIMEOUT[{mode!r}] in "
        "tools/build_book.py (at most 270 s, so that a hang still fails within 5 minutes)"
    )


def test_a_hung_cell_fails_the_build_at_the_timeout_naming_the_chapter_and_the_cell(tmp_path):
    root = make_book(tmp_path / "hang", ["03_hang.md"])
    timeout = 15  # the mechanism is the same at any limit; the real limits are checked above
    t0 = time.perf_counter()
    rc, log, _stage, _seconds = run_build(
        "--root",
        str(root),
        "--mode",
        "fast",
        "--no-html",
        "--cell-timeout",
        str(timeout),
        stage=root / "_build" / "stage",
    )
    elapsed = time.perf_counter() - t0
    print(f"\nhung cell: the build failed after {elapsed:.1f} s with a {timeout} s cell timeout")
    assert rc != 0, log[-2000:]
    assert elapsed < timeout + KERNEL_OVERHEAD, f"the build took {elapsed:.0f} s to fail"
    assert (
        "FAILED: 03_hang" in log and "03_hang: cell 4 (`import time`) ran longer than 15 s" in log
    ), log[-2000:]
