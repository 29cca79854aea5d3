"""Execution modes of the chapters: ``fast`` (CI smoke run), ``default`` (the rendered book, CPU minutes)
and ``paper`` (the paper's sizes; GPU or hours of CPU). Each chapter keeps one table of sizes per mode and
shows it, so a reader sees exactly what was run."""

from __future__ import annotations

from .._checks import check_bool, check_choice

__all__ = ["check_device", "select_sizes"]

#: The execution modes, from the smallest sizes to the paper's.
MODES = ("fast", "default", "paper")


def select_sizes(table: dict, mode: str, *, show: bool = True) -> dict:
    """Return ``table[mode]`` after checking that every mode lists the same keys.

    With ``show=True`` the whole table is displayed (Markdown in Jupyter, text elsewhere), the current
    mode in bold, so the page states the sizes of every mode.

    Raises
    ------
    ValueError if ``mode`` is not one of ``fast``, ``default``, ``paper`` or the modes list different keys.
    """
    check_choice("mode", mode, MODES)
    check_bool("show", show)
    if not isinstance(table, dict) or not all(isinstance(t, dict) for t in table.values()):
        raise TypeError(
            f"table must be a dict of dicts (mode -> sizes), got {type(table).__name__}"
        )
    if set(table) != set(MODES):
        raise ValueError(f"table must have exactly the keys {MODES}, got {sorted(table)}")
    keys = list(table["default"])
    for m in MODES:
        if list(table[m]) != keys:
            raise ValueError(
                f"table[{m!r}] must list the keys {keys} (in that order), got {list(table[m])}"
            )
    if show:
        _show(table, mode, keys)
    return dict(table[mode])


def _fmt(v) -> str:
    if isinstance(v, (list, tuple)):
        if len(v) > 6:
            return f"{len(v)} values, {_fmt(v[0])} … {_fmt(v[-1])}"
        return ", ".join(_fmt(x) for x in v)
    if isinstance(v, int) and abs(v) >= 10_000:
        return f"{v:,}".replace(",", " ")
    return str(v)


def _show(table, mode, keys):
    head = "| size | " + " | ".join(f"**{m}** (this run)" if m == mode else m for m in MODES) + " |"
    rows = [head, "|---|" + "---|" * len(MODES)]
    for k in keys:
        cells = [f"**{_fmt(table[m][k])}**" if m == mode else _fmt(table[m][k]) for m in MODES]
        rows.append(f"| `{k}` | " + " | ".join(cells) + " |")
    md = "\n".join(rows)
    try:
        from IPython import get_ipython
        from IPython.display import Markdown, display

        if get_ipython() is not None:
            display(Markdown(md))
            return
    except ImportError:  # pragma: no cover - IPython is always present in the book's environment
        pass
    print(md)


def check_device(device: str):
    """``torch.device(device)``, falling back to the CPU with a message when CUDA is asked for but absent."""
    if not isinstance(device, str):
        raise TypeError(
            f"device must be a string such as 'cpu' or 'cuda', got {type(device).__name__}"
        )
    import torch

    try:
        torch.device(device)
    except RuntimeError as exc:
        raise ValueError(
            f"device must name a torch device such as 'cpu' or 'cuda', got {device!r}"
        ) from exc
    if device.startswith("cuda") and not torch.cuda.is_available():
        print(f"device={device!r} was asked for but CUDA is not available: running on the CPU.")
        return torch.device("cpu")
    return torch.device(device)
