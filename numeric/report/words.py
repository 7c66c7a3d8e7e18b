"""The words the report and the command line print for counts, kept in one place so that the page, the summary
lines and README say the same thing.

A failed row is called **FAILS** everywhere: the verdict of a row (:data:`resprop.numeric.report.claims.FAILS`),
the count on the page and in the summary line ("0 FAILS"), and the key ``fails`` of every ``counts`` dict in
report.json.
"""
from __future__ import annotations

from collections.abc import Mapping

__all__ = ["plural", "count_words", "counts_text"]


def plural(n: int, singular: str, plural_form: str | None = None) -> str:
    """``n`` and the word in the form that agrees with it: ``plural(1, "row")`` is "1 row", ``plural(2, "row")``
    "2 rows" and ``plural(0, "row")`` "0 rows"; ``plural_form`` for a form that is not ``singular + "s"``
    (``plural(1, "agrees", "agree")`` is "1 agrees", ``plural(3, "agrees", "agree")`` "3 agree")."""
    if isinstance(n, bool) or not isinstance(n, int):
        from resprop.numeric.engine.validation import ParameterError

        raise ParameterError("n", f"must be an integer count, got {n!r}")
    word = singular if n == 1 else (singular + "s" if plural_form is None else plural_form)
    return f"{n} {word}"


def count_words(counts: Mapping[str, int]) -> list[str]:
    """The pieces of a verdict count (a ``counts`` dict of report.json): ["84 rows", "80 agree",
    "1 documented disagreement", "0 FAILS"]."""
    return [plural(counts["rows"], "row"), plural(counts["agrees"], "agrees", "agree"),
            plural(counts["documented_disagreements"], "documented disagreement"),
            plural(counts["fails"], "FAILS", "FAILS")]


def counts_text(counts: Mapping[str, int]) -> str:
    """:func:`count_words` as one line: "84 rows, 80 agree, 1 documented disagreement, 0 FAILS"."""
    return ", ".join(count_words(counts))
