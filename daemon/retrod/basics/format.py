"""How a figure is shown to a person: one function per kind, so that the Markdown report, the web
pages, `trends`, the brief, `lessons`, the command line, the MCP tools' text and the status line
print the same figure the same way. The rules are in docs/reference.md ("How figures are shown").

Every rounding here is half up, to the unit shown (2.5 s is "2.5s", 12.25k tokens "12.3k"): Python's
round() and format() round a tie to even, which would make 58.5 s "58s" but 59.5 s "1m 00s".

Standard library only, and only its lightest part (no datetime at import, no re, no typing):
`retrod statusline` imports it, and runs after every message.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing itself is not imported (see above)
if TYPE_CHECKING:
    from datetime import datetime, tzinfo
    from typing import overload
else:
    def overload(function):  # (only the type checker reads the variants; the last definition stands)
        return function

NONE = "—"  # a figure that does not exist (no calls to judge, no time to show)
MINUS = "−"  # U+2212, as wide as "+": a signed column lines up


def _units(value: float, per: float) -> int:
    """`value` (not negative) times `per` (the units per one of it: 10 for tenths, 1/60 for
    minutes of seconds), rounded half up to a whole number."""
    return int(value * per + 0.5)


def duration(seconds: float | None) -> str:
    """A length of time, in at most two units: "4.2s" below 10 s (tenths: a tool's time to result
    is often under a second), "45s" below a minute, "2m 05s" below an hour, "1h 05m" below a day,
    "3d 04h" from a day on. Rounded half up to the smallest unit shown, taking the next form when
    that reaches it (59.5 s is "1m 00s", 3599.5 s "1h 00m"). Negative (a clock stepped back)
    shows as no time at all; None as a dash."""
    if seconds is None:
        return NONE
    s = max(0.0, float(seconds))
    tenths = _units(s, 10)
    if tenths < 100:
        return f"{tenths // 10}.{tenths % 10}s"
    whole = _units(s, 1)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    minutes = _units(s, 1 / 60)
    if minutes < 24 * 60:
        return f"{minutes // 60}h {minutes % 60:02d}m"
    hours = _units(s, 1 / 3600)
    return f"{hours // 24}d {hours % 24:02d}h"


def usd(value: float | None, missing: str = "not priced") -> str:
    """An estimated cost in dollars and cents, with thousands separators: "$1,234.56". An amount
    above zero that would show as $0.00 is "<$0.01", so that money spent never reads as none.
    None: `missing`, by default "not priced" (no price is known for what it counts); a dash
    (`NONE`) where None means there was nothing to count."""
    if value is None:
        return missing
    cents = _units(abs(value), 100)
    if value > 0 and not cents:
        return "<$0.01"
    return f"{MINUS if value < 0 and cents else ''}${cents // 100:,}.{cents % 100:02d}"


def cost(value: float | None, complete: bool = True, priced: bool = True) -> str:
    """A total cost: `usd`, marked "≥ " when it leaves out what no price is known for (a lower
    bound: `complete` false). None: "not priced" when something went unpriced (`priced` false),
    else a dash (nothing to price)."""
    if value is None:
        return NONE if priced else "not priced"
    return usd(value) if complete else f"≥ {usd(value)}"


def usd_change(value: float | None) -> str:
    """A change in dollars, always signed, to the cent: "+$0.12", "−$1.50", and "+$0.00" for less
    than half a cent either way; None: a dash."""
    if value is None:
        return NONE
    cents = _units(abs(value), 100)
    return f"{MINUS if value < 0 and cents else '+'}${cents // 100:,}.{cents % 100:02d}"


def share(ratio: float | None) -> str:
    """A share (0 to 1: tool-use efficiency, a cache hit ratio, a part of the cost) as a whole
    percent, half up: "87%". A share above 0 and below 1 never reads as none or all: "<1%",
    ">99%". None: a dash."""
    if ratio is None:
        return NONE
    if 0 < ratio < 0.005:
        return "<1%"
    if 0.995 <= ratio < 1:
        return ">99%"
    pct = _units(abs(ratio), 100)
    return f"{MINUS if ratio < 0 and pct else ''}{pct}%"


def points(change: float | None) -> str:
    """A change of a share in percentage points, always signed: "+5", "−12", "+0"; None: a dash."""
    if change is None:
        return NONE
    pct = _units(abs(change), 100)
    return f"{MINUS if change < 0 and pct else '+'}{pct}"


def rate(per_100: float | None) -> str:
    """A rate per 100 tool calls or requests (docs/accounting.md §2.10) to a tenth, half up:
    "3.4"; None (nothing to count it over): a dash."""
    if per_100 is None:
        return NONE
    tenths = _units(max(0.0, per_100), 10)
    return f"{tenths // 10}.{tenths % 10}"


def count(n: float | None) -> str:
    """An exact count (tokens, calls, requests, bytes where each counts) with thousands separators:
    "1,234,567"; None: a dash."""
    return NONE if n is None else f"{int(n):,}"


def _scaled(n: float, units: tuple[str, ...]) -> str:
    """`n` (1,000 or more) in the first of `units` (each 1,000 times the one before, the first
    1,000) in which, to a tenth half up, it is below 1,000; ".0" dropped."""
    value = float(n)
    for i, unit in enumerate(units):
        value /= 1000
        tenths = _units(value, 10)
        if tenths < 10_000 or i == len(units) - 1:
            return f"{tenths // 10:,}" + (f".{tenths % 10}" if tenths % 10 else "") + unit
    raise AssertionError("no unit")  # (units is never empty)


def tokens(n: float | None) -> str:
    """A token count where a cell is small: below 1,000 exact, then k, M and G to a tenth ("38.9k",
    "100k", "1.5M"), in the smallest unit that keeps it below 1,000 once rounded (999,999 is "1M",
    not "1000k"). None: a dash."""
    if n is None:
        return NONE
    n = max(0, int(n))
    return f"{n}" if n < 1000 else _scaled(n, ("k", "M", "G"))


def size(n: float | None) -> str:
    """Bytes: below 1,000 exact ("512 B"), then decimal KB, MB, GB and TB by the rule of `tokens`
    ("1.5 KB", "12 MB"). None: a dash."""
    if n is None:
        return NONE
    n = max(0, int(n))
    return f"{n} B" if n < 1000 else _scaled(n, (" KB", " MB", " GB", " TB"))


@overload
def instant(ts: datetime) -> str: ...
@overload
def instant(ts: datetime | None) -> str | None: ...  # noqa: F811 (overload variants: see TYPE_CHECKING above)
def instant(ts: datetime | None) -> str | None:  # noqa: F811
    """An instant, for JSON and wherever one is shown whole: RFC 3339 in UTC with milliseconds,
    truncated, never rounded (docs/accounting.md §2.1), e.g. "2026-02-11T20:36:45.618Z". None
    stays None (JSON's null). An instant without a time zone is refused: which it is is unknown."""
    if ts is None:
        return None
    if ts.tzinfo is None:
        raise ValueError(f"an instant without a time zone: {ts!r}")
    # (isoformat truncates to the millisecond too, in C: a quarter of strftime's time, and a long
    # report shows hundreds of instants)
    return ts.astimezone(_utc()).isoformat(timespec="milliseconds")[:-6] + "Z"


def _utc() -> tzinfo:
    from datetime import UTC  # here, not at the top: the status line shows no instant

    return UTC
