"""The reader apparatus of the book, apart from the mathematics: a page's size table by ``mode``
(:mod:`softlin.book.modes`), the figure style (:mod:`softlin.book.plotting`), the explorers,
``show_source`` (:mod:`softlin.book.widgets`) and the exercises' self-checks, whose answer keys are
computed from a registry (:mod:`softlin.book.exercises`); the lessons' quick quizzes
(:mod:`softlin.book.quiz`); and :func:`committed_data`, the results files committed with the book, with
:func:`seed_record_summary`, what the seed record says of a page. The
paper's experiment is :mod:`softlin.experiment`."""

from .._data import committed_data, seed_record_summary

__all__ = ["committed_data", "seed_record_summary"]
