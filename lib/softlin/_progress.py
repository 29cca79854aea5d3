"""Progress of the long loops: a ``tqdm.auto`` bar when a loop will take more than a few seconds.

A loop over chunks of tokens or batches of prompts estimates its work before it starts (coordinates of
tokens times directions, roughly the multiply-adds it will do) and shows a bar only when that work would
take more than :data:`SECONDS` at :data:`RATE`, the speed of the engine on one core of a laptop: a quick
call prints nothing, and whether a bar appears depends on the sizes only, never on the machine's load
(a page prints the same thing on every run). ``SOFTLIN_PROGRESS=0`` in the environment turns every bar
off, ``SOFTLIN_PROGRESS=1`` shows them all.
"""

from __future__ import annotations

import os

#: Work units (token coordinates times directions) the engine does per second, about.
RATE = 2e8
#: A loop estimated to take longer than this shows a progress bar.
SECONDS = 5.0


def progress(iterable, *, work: float, desc: str | None = None):
    """``iterable``, wrapped in a ``tqdm.auto`` bar when ``work / RATE`` exceeds ``SECONDS``."""
    setting = os.environ.get("SOFTLIN_PROGRESS", "")
    if setting == "0" or (setting != "1" and work < RATE * SECONDS):
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, desc=desc, mininterval=1.0, leave=False)
