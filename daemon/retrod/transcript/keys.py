"""Ids, names and paths read from transcripts as rows are keyed by them (accounting.md §2.1: strings of
any length, kept and compared whole, never stopping ingest). Standard library only: discovery
uses it too, which commands that read no transcript import."""

from __future__ import annotations

import hashlib

# A string an index holds whole is at most this long (in UTF-8); a longer one is stored as its
# start and a SHA-256 of the whole (accounting.md §2.1: any length, never stopping ingest). A btree row
# holds ~2.7 kB, and an index may hold several such columns (tool_uses: session, agent, path and
# the transcript's path).
INDEX_BYTES = 200
PATH_INDEX_BYTES = 1000  # a transcript's own path: whole up to here, since files sort by it (§2.6)
# The key of a record with no id (its file's host-qualified path and offset): whole up to here, as
# a retrod from before could store it, so that a file read again keys the same record the same.
PLACE_KEY_BYTES = 2000
_HASHED = "…#"  # between the kept start and the hash


def indexable(text: str, limit: int = INDEX_BYTES, keep_start: bool = True) -> str:
    """`text` whole when an index can hold it, else its first bytes and the SHA-256 of all of it:
    two different strings still compare different (short of a SHA-256 collision), and equal ones
    equal, so keys and comparisons keep their meaning. A text that holds the marker is hashed
    whatever its length, so that no short text can pass for a long one's form (a request key's
    form, `\\h` and the hash, cannot: see below)."""
    marked = keep_start and _HASHED in text
    if not marked and (len(text) <= limit // 4 or (len(text) <= limit and text.isascii())):
        return text
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit and not marked:
        return text
    digest = hashlib.sha256(data).hexdigest()
    if not keep_start:
        # A request key, never shown: escaped keys hold a backslash only before \\, 0 or u, so
        # this form can never equal a short key.
        return "\\h" + digest
    return data[: limit - 80].decode("utf-8", "ignore") + _HASHED + digest
