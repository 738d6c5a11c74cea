"""Stored text is data (accounting.md §2.10): how a string retrod did not write itself — a task, a phase,
a lesson, a description, a path or command from a transcript, a project, model or agent name — is
shown to Claude or on a terminal. Such a string may hold anything a transcript or a phase's
author put there: newlines that would start a line of its own (a `## SYSTEM …` heading in
Claude's context), escape sequences a terminal obeys (OSC 52 writes the clipboard, OSC 0 the
window's title, CSI moves the cursor), bidirectional overrides that make text read backwards.

Standard library only, and nothing imported at the top: the status line (statusline/render.py)
shows a phase's name with it after every message."""

from __future__ import annotations

MAX_CHARS = 200  # code points, the ellipsis included
ELLIPSIS = "…"
# Controls (C0, C1, DEL), format characters (bidirectional overrides, zero-width joiners),
# surrogates, and the line and paragraph separators: each becomes a space.
BLANKED = frozenset(("Cc", "Cf", "Cs", "Zl", "Zp"))


def blanked(c: str) -> bool:
    """Whether rule 1 turns the character `c` into a space."""
    if c.isascii():  # (the common case, without unicodedata)
        return c.isspace() or not c.isprintable()
    import unicodedata  # only for text that is not ASCII: the status line must stay light

    return c.isspace() or unicodedata.category(c) in BLANKED


def flat(value: object) -> str:
    """Rule 1: one line without a control, format or separator character, runs of spaces as one,
    trimmed, whatever its length. Alone only in HTML (ui/markup.py, ui/pages.py), which lays out
    any length and is also what `retrod report --format html` prints. None is ''."""
    text = "" if value is None else str(value)
    if not (text.isascii() and text.isprintable()):
        text = "".join(" " if blanked(c) else c for c in text)
    return " ".join(part for part in text.split(" ") if part)  # every whitespace is a space by now


def one_line(value: object) -> str:
    """Rules 1 and 2: `flat`, and at most MAX_CHARS code points (its first MAX_CHARS - 1 and `…`
    when longer). For where quotes do not fit (a Markdown table's cell, a diagram's label, the
    status line's cells); everywhere else `quoted`. None is ''."""
    text = flat(value)
    return text if len(text) <= MAX_CHARS else text[:MAX_CHARS - 1] + ELLIPSIS


def quoted(value: object) -> str:
    """Rules 1 to 3: `one_line`'s text in double quotes, `\\` as `\\\\` and `"` as `\\"` (its
    JSON string form), so that it can neither end its quotes nor be read as retrod's own words.
    None is '""'."""
    text = one_line(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'
