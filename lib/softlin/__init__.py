"""softlin: the companion library of the book on "Softmax as Linear Attention in the Large-Prompt
Regime: a Measure-based Perspective" (Boursier & Boyer, ICML 2026).

Core names (see each docstring for shapes, errors and the paper result it implements):

- :func:`softmax_attention`, :func:`linear_attention`, :func:`softmax_weights` -- finite prompts;
- :class:`GaussianMeasure`, :class:`EmpiricalMeasure`, :class:`RademacherMeasure`, ... -- token laws;
- :func:`attention_limit` (``V grad log M_mu(U z)``), :func:`gaussian_attention_limit` (Lemma 2.1).

Submodules: ``softlin.plotting`` (figure style), ``softlin.widgets`` (explorers with static fallbacks),
and one module per chapter topic.
"""

from .attention import linear_attention, softmax_attention, softmax_weights
from .measures import (
    EmpiricalMeasure,
    GaussianMeasure,
    GaussianMixtureMeasure,
    LogNormalMeasure,
    RademacherMeasure,
    StudentTMeasure,
    TokenMeasure,
    UniformMeasure,
    attention_limit,
    gaussian_attention_limit,
)

__version__ = "0.1.0"

__all__ = [
    "softmax_attention",
    "linear_attention",
    "softmax_weights",
    "TokenMeasure",
    "GaussianMeasure",
    "EmpiricalMeasure",
    "RademacherMeasure",
    "UniformMeasure",
    "GaussianMixtureMeasure",
    "StudentTMeasure",
    "LogNormalMeasure",
    "attention_limit",
    "gaussian_attention_limit",
]
