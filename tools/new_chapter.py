#!/usr/bin/env python
"""Create a new lesson skeleton ``book/NN_name.md`` (jupytext MyST) or its lab
``book/labs/NN_name.md``, with the paired ``.ipynb``.

    python tools/new_chapter.py 08_my_topic "My topic"         # a lesson (the toc numbers lessons)
    python tools/new_chapter.py --lab 08_my_topic "My topic"   # its lab: "Lab 8: My topic"
    python tools/new_chapter.py --refresh-setup               # rewrite every setup cell (a fork)

The skeleton holds the Colab setup cell (its install URL is the repository URL of ``_config.yml``),
the ``parameters`` cell (mode, device, seed) and the sections every lesson (or lab) has. Add the page to
``_toc.yml`` yourself (a lesson to the part "Lessons", its lab to "Labs"). ``--refresh-setup`` rewrites
the setup cell of every page of ``book/`` that has one from the template (after ``repository.url``
changed, e.g. in a fork) and re-pairs the notebooks.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]

FRONT = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
    format_version: 0.13
    jupytext_version: 1.19.6
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---
"""


def repository_url() -> str:
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    return cfg["repository"]["url"]


def setup_code(commit: str | None = None) -> str:
    """The source of the setup cell, the first code cell of every page: it installs softlin where it
    is not importable, from a ``softlin-*.whl`` in the working directory when there is one (the
    student notebooks' folder and zip carry one, tools/student_notebooks.py), else in Colab (or where
    SOFTLIN_SOURCE is set) from the book's repository. The pages on main install from ``main``; a
    converted notebook (tools/colab_notebooks.py) installs at the ``commit`` it was converted from,
    and says so."""
    url = repository_url()
    ref = commit or "main"
    pinned = (
        f"# This notebook was converted from commit {commit[:12]} of the book: without a\n"
        "# wheel it installs softlin at that commit, so that the notebook and library agree.\n"
        if commit
        else ""
    )
    return f"""# Setup for Colab: install this book's library, softlin, when it is not importable.
{pinned}# A wheel comes first: softlin-*.whl in the working folder (the newest), as the student
# notebooks' folder and zip carry it (`make students`; in Colab, upload it to the Files
# pane). Else, in Colab or where SOFTLIN_SOURCE is set, SOFTLIN_SOURCE (a pip
# requirement: git URL or local path; by default the book's repository). Else a no-op.
import glob, importlib, importlib.util, os, sys

from packaging.version import Version  # ipykernel depends on it: every kernel has it

wheels = sorted(glob.glob("softlin-*.whl"), key=lambda w: Version(w.split("-")[1]))
SOFTLIN_SOURCE = os.environ.get(
    "SOFTLIN_SOURCE", "git+{url}@{ref}")
wanted = wheels or "google.colab" in sys.modules or "SOFTLIN_SOURCE" in os.environ
if wanted and importlib.util.find_spec("softlin") is None:
    source = wheels[-1] if wheels else SOFTLIN_SOURCE
    %pip install -q {{source}}
    importlib.invalidate_caches()
"""


def setup_cell() -> str:
    """The setup cell as the MyST pages hold it (installing from main)."""
    return f"""```{{code-cell}} ipython3
:tags: [remove-cell]

{setup_code()}```
"""


PARAMETERS = """```{code-cell} ipython3
:tags: [parameters, hide-cell]

mode = "default"  # "fast": a quick run; "default": the rendered book; "paper": full
device = "cpu"    # "cuda" where available (Colab: Runtime > Change runtime type > GPU)
seed = 0
```
"""


# The exercise conventions (README, "Writing or editing a chapter"): a self-checking exercise and a
# conceptual one; tests/test_course.py and tests/test_exercises.py check them.
EXERCISES = """
## Exercises

```{exercise} A number to compute
:label: ex-LABEL-value

...
```

```{code-cell} ipython3
:tags: [remove-cell]

check_ex_LABEL_value = answer_check(lambda: ..., rtol=1e-9, hint="Hint: ...")
```

```{code-cell} ipython3
:tags: [exercise-check]

answer = None  # your answer: ...
check_ex_LABEL_value(answer)
```

````{solution} ex-LABEL-value
:class: dropdown

...

```python
answer = ...
```
````

```{exercise} Explain or predict
:label: ex-LABEL-why
:class: conceptual

...
```

````{solution} ex-LABEL-why
:class: dropdown

...
````
"""


def skeleton(title: str) -> str:
    return (
        FRONT
        + f"\n# {title}\n\n"
        + ":::{admonition} In this chapter\n:class: tip\n\n"
        + "**Learning objectives.** ...\n\n**Prerequisites.** ...\n\n"
        + "**Time.** About ... to read; ... s to run on a laptop CPU (default mode), ... in Colab.\n:::\n\n"
        + setup_cell()
        + "\n"
        + PARAMETERS
        + EXERCISES
        + "\n## Summary\n\n- ...\n"
    )


def lab_skeleton(stem: str, title: str) -> str:
    number = int(stem[:2])
    return (
        FRONT
        + f"\n# Lab {number}: {title}\n\n"
        + ":::{admonition} This lab\n:class: tip\n\n"
        + f"The lab of lesson {number}, {{doc}}`../{stem}`: ... Read the lesson first.\n:::\n\n"
        + setup_cell()
        + "\n"
        + PARAMETERS
        + "\n## What this lab checks\n\n| claim | how it is checked | section |\n|---|---|---|\n"
    )


def refresh_setup() -> list[Path]:
    """Replace the setup cell of every page of book/ that has one by :func:`setup_cell`; return them."""
    pattern = re.compile(
        r"```\{code-cell\} ipython3\n:tags: \[remove-cell\]\n\n# Setup for Colab.*?\n```\n",
        re.DOTALL,
    )
    changed = []
    for md in sorted((ROOT / "book").glob("*.md")) + sorted((ROOT / "book" / "labs").glob("*.md")):
        text = md.read_text()
        new = pattern.sub(lambda _m: setup_cell(), text, count=1)
        if new != text:
            md.write_text(new)
            subprocess.check_call([sys.executable, "-m", "jupytext", "--sync", "-q", str(md)])
            changed.append(md)
    return changed


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--refresh-setup"]:
        changed = refresh_setup()
        print(
            f"setup cell rewritten in {len(changed)} page(s): " + ", ".join(p.name for p in changed)
        )
        return 0
    lab = argv[:1] == ["--lab"]
    argv = argv[1:] if lab else argv
    if len(argv) != 2 or not re.match(r"\d\d_", argv[0]):
        print(__doc__)
        return 2
    stem, title = argv
    md = ROOT / "book" / ("labs" if lab else "") / f"{stem}.md"
    if md.exists():
        print(f"{md} exists; not overwriting")
        return 1
    md.parent.mkdir(exist_ok=True)
    md.write_text(lab_skeleton(stem, title) if lab else skeleton(title))
    subprocess.check_call([sys.executable, "-m", "jupytext", "--sync", str(md)])
    where = "Labs" if lab else "Lessons"
    print(
        f"created {md} and its paired .ipynb; add '{md.relative_to(ROOT).with_suffix('')}' to "
        f"the part {where} of _toc.yml"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
