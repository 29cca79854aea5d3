"""The reader apparatus of the book, apart from the mathematics: a chapter's size table by ``mode``
(:mod:`softlin.book.modes`), the figure style (:mod:`softlin.book.plotting`), the explorers,
``show_source`` (:mod:`softlin.book.widgets`) and the exercises' self-checks, whose answer keys are
computed from a registry (:mod:`softlin.book.exercises`)."""
