"""Progress of the long loops: a ``tqdm.auto`` bar when a loop will take more than a few seconds.

A loop over chunks of tokens or batches of prompts estimates its work before it starts (the coordinates
of the tokens it will draw: drawing them and their scores is most of the cost) and shows a bar only when
that work would take more than :data:`SECONDS` at :data:`RATE`, measured on one core of the build machine:
a quick call prints nothing, and whether a bar appears depends on the sizes only, never on the machine's
load. ``SOFTLIN_PROGRESS=0`` in the environment turns every bar off (the book's build sets it, so that a
page prints the same thing on every run), ``SOFTLIN_PROGRESS=1`` shows them all.
"""

from __future__ import annotations

import os

#: Token coordinates drawn and consumed per second on one core (sample_errors, finite_prompt_risk and
#: risk_gap: 2-4e7, measured).
RATE = 2e7
#: A loop estimated to take longer than this shows a progress bar.
SECONDS = 5.0


def progress(iterable, *, work: float, rate: float = RATE, desc: str | None = None):
    """``iterable``, wrapped in a ``tqdm.auto`` bar when ``work / rate`` exceeds ``SECONDS``."""
    setting = os.environ.get("SOFTLIN_PROGRESS", "")
    if setting == "0" or (setting != "1" and work < rate * SECONDS):
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, desc=desc, mininterval=1.0, leave=False)
