"""Reading complete lines of a growing file from a byte offset."""

from __future__ import annotations

import os
from dataclasses import dataclass

BOM = b"\xef\xbb\xbf"  # a UTF-8 byte order mark, which some editors write at the start of a file


@dataclass(frozen=True, slots=True)
class Chunk:
    lines: list[tuple[int, bytes]]  # (byte offset of the line, line without "\n" or "\r\n")
    end: int  # offset just past the last complete line read


def read_chunk(fd: int, offset: int, max_bytes: int) -> Chunk:
    """Complete lines from `offset`, about `max_bytes` of them (more when one line is longer).

    A trailing line without its newline is left for a later read, when the writer has finished it.
    """
    buf = os.pread(fd, max_bytes, offset)
    while buf and buf.rfind(b"\n") < 0:
        more = os.pread(fd, max_bytes, offset + len(buf))
        if not more:
            break
        buf += more
    last = buf.rfind(b"\n")
    if last < 0:
        return Chunk([], offset)
    lines = []
    start = len(BOM) if offset == 0 and buf.startswith(BOM) else 0  # accounting.md §2.1: ignored
    while start <= last:
        nl = buf.index(b"\n", start)
        end = nl - 1 if nl > start and buf[nl - 1] == 13 else nl  # 13: "\r"
        lines.append((offset + start, buf[start:end]))
        start = nl + 1
    return Chunk(lines, offset + last + 1)
