"""The verdicts a phase can be given (accounting.md §3), worst last."""

from .stored_text import quoted

VERDICTS = ("high_impact", "moderate_impact", "small_impact", "exploratory_useful",
            "exploratory_waste", "avoidable_waste")
PENDING = "pending"  # an open phase's, until it ends with one of VERDICTS


def shown(verdict: object) -> str:
    """A phase's verdict as text shows it: one of VERDICTS (or PENDING) as retrod's own word,
    anything else (the user's own tooling may write any text there) quoted, as stored text is
    (accounting.md §2.10)."""
    return verdict if isinstance(verdict, str) and verdict in (*VERDICTS, PENDING) else quoted(verdict)
