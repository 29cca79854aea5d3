"""softlin: the companion library of the book on "Softmax as Linear Attention in the Large-Prompt
Regime: a Measure-based Perspective" (Boursier & Boyer, ICML 2026).

The top level holds the attention engine and the token laws (each docstring gives shapes, errors and the
paper result it implements):

- :func:`softmax_attention`, :func:`linear_attention`, :func:`tilted_mean` and its online form
  :class:`TiltedSums` -- finite prompts (module ``softlin.attention``);
- :class:`GaussianMeasure`, :class:`EmpiricalMeasure`, :class:`RademacherMeasure`, ... -- token laws, with
  :func:`attention_limit` (``V grad log M_mu(U z)``) and :func:`gaussian_attention_limit` (Lemma 2.1)
  (module ``softlin.measures``).

The other modules are named after their ideas and load on first use (``softlin.icl.kms_covariance`` works
after ``import softlin``): ``montecarlo`` (prompt sampler, standard errors, power-law fits),
``concentration`` (Section 3), ``stability`` (Section 4), ``icl`` (Section 5), ``experiment`` (the paper's
Section 5 experiment: its protocol, model, training, evaluation and committed results); the reader
apparatus (modes, figure style, explorers, exercise self-checks) is the subpackage ``softlin.book``.
"""

import importlib

from . import attention, measures
from .attention import *  # noqa: F403 (the names of attention.__all__)
from .measures import *  # noqa: F403 (the names of measures.__all__)

__version__ = "0.2.0"

#: Submodules loaded on first attribute access (PEP 562).
SUBMODULES = (
    "attention",
    "measures",
    "montecarlo",
    "concentration",
    "icl",
    "stability",
    "experiment",
    "book",
)

#: The top-level names: those of the attention engine and of the token laws.
__all__ = attention.__all__ + measures.__all__


def __getattr__(name):
    if name in SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(SUBMODULES))
