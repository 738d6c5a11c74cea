"""The status line's text: Claude Code's JSON and the daemon's figures laid out in at most two
lines of `columns` cells. Standard library only, and only its lightest parts (no dataclasses,
typing or re: each would cost milliseconds of a command that runs after every message), besides
stored_text, which shows a stored name the way every other surface does, and basics/format.py,
which shows every figure the way every other surface does; both are as light.

Line 1 is the session's money and waste: retrod's cost (the report's), Claude Code's own
estimate beside it, today's cost, tool-use efficiency and wasted calls, the time split. Line 2 is
where the work stands: the open phase (else the current task of Claude's plan with its cost so far,
or a nudge to log a phase), context used, rate-limit use with
the time to its reset, the model, the prompt cache, lines changed. What is unknown is left out,
never shown as a zero. Too wide, figures take shorter forms and the least needed go, in an order
each line sets (the steps below); what must stay is cut only when it alone does not fit.
"""

from __future__ import annotations

from ..basics.format import duration, share, tokens, usd
from ..basics.stored_text import one_line

SEPARATOR = " | "
ELLIPSIS = "…"
RESET = "\x1b[0m"
SGR = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}
# Shares of a budget (context, a rate-limit window): green below the first, yellow below the
# second, red above (ccusage's defaults for context).
LOW, HIGH = 50, 80
# The symbols retrod's own figures use, one cell each: known without unicodedata's tables.
NARROW = ELLIPSIS + "≈≥"
# Cut a phase's or model's name to this many cells in the shortest form.
SHORT_NAME = 12
# A plan's task is often a sentence: at most this many cells of it, even where the line has room.
TASK_NAME = 32

TYPE_CHECKING = False  # typing itself is not imported (see above)
if TYPE_CHECKING:
    from collections.abc import Sequence


class Segment:
    """One figure: its name (which the steps below name), its forms, longest first, and colour."""

    __slots__ = ("colour", "forms", "name")

    def __init__(self, name: str, forms: Sequence[str], colour: str | None = None) -> None:
        self.name = name
        self.forms = [f for f in dict.fromkeys(forms) if f]  # distinct, in order
        self.colour = colour


# How each line gives way when it is too wide: a step names a segment, which takes its next
# shorter form, or ("-" first) goes. Taken in order until the line fits; then every step is
# undone that still lets it fit, the latest first (a segment gone may leave room for a longer
# form of another). A segment no step takes away stays whatever the width: this session's cost,
# today's cost, the efficiency and waste, the open phase (else the line is cut).
MONEY_STEPS = ("split", "eff", "cc", "cost", "-split", "eff", "-cc", "today", "eff")
# The prompt cache outlasts the 7-day window and the model, and a cold one's price goes last:
# the seconds left, or what going on costs, are what a person can still act on (issue 29).
WORK_STEPS = ("phase", "7d", "5h", "ctx", "model", "cache", "-lines", "7d", "-7d", "cache", "5h", "model", "-model",
              "phase", "cache", "-cache", "-5h", "-ctx", "phase")
ALONE_STEPS = ("mark", "cc", "-elapsed", "mark", "today", "-cc", "mark")  # no figures of retrod's


# ---- values as shown ------------------------------------------------------------------------

def number(value: object) -> float | None:
    """A JSON number (not a bool), finite; else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)  # an integer JSON may hold, past a float's range: none
    except OverflowError:
        return None
    return number if number - number == 0 else None  # NaN and infinities are not


def get(obj: object, *keys: str) -> object:
    """obj[k1][k2]…, or None where a level is missing or not an object."""
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def text(value: object) -> str | None:
    """A string (a phase's, task's or model's name) as stored text is shown where quotes do not
    fit (stored_text.one_line: one line, no control character, at most 200 characters); None when
    empty or not a string."""
    if not isinstance(value, str):
        return None
    return one_line(value) or None


def cost(figures: dict, key: str = "cost_usd", complete: str = "cost_complete", cents: bool = True) -> str | None:
    """A cost as format.cost shows it; without `cents`, the line's short form when it is too wide:
    whole dollars from $10 ("$12"), the cents being what a glance needs least."""
    value = number(figures.get(key))
    if value is None:
        return None
    shown = usd(value) if cents or value < 10 else f"${value:,.0f}"
    return shown if figures.get(complete, True) else f"≥ {shown}"


def share_colour(pct: float) -> str:
    return "green" if pct < LOW else "yellow" if pct < HIGH else "red"


def width(s: str) -> int:
    """Terminal cells: East Asian wide characters take two, combining marks none."""
    if s.isascii() or all(c.isascii() or c in NARROW for c in s):
        return len(s)
    import unicodedata  # only for text that is not ASCII (a phase or model named so)

    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in s)


def cut(s: str, cells: int) -> str:
    """`s` in at most `cells` cells, ending in … when cut."""
    if width(s) <= cells:
        return s
    out, used = [], 0
    for c in s:
        w = width(c)
        if used + w > cells - 1:
            break
        out.append(c)
        used += w
    return "".join(out).rstrip() + ELLIPSIS if cells > 0 else ""


# ---- laying a line out ----------------------------------------------------------------------

def fit(segments: list[Segment], steps: Sequence[str], columns: int, colour: bool) -> str:
    """The segments in at most `columns` cells, giving way by `steps` (see above)."""
    shown = [s for s in segments if s.forms]
    levels = {s.name: 0 for s in shown}

    def fits() -> bool:
        return _joined_width([s.forms[levels[s.name]] for s in shown if s.name in levels]) <= columns

    taken: list[tuple[str, int]] = []  # (segment, the level it had) of each step taken
    for step in steps:
        if fits():
            break
        name = step.removeprefix("-")
        if name not in levels:
            continue
        forms = next(s.forms for s in shown if s.name == name)
        if step.startswith("-"):
            taken.append((name, levels.pop(name)))
        elif levels[name] < len(forms) - 1:
            taken.append((name, levels[name]))
            levels[name] += 1
    if fits():
        for name, level in reversed(taken):
            now = levels.get(name)
            levels[name] = level
            if not fits():
                if now is None:
                    del levels[name]
                else:
                    levels[name] = now
    chosen = [s for s in shown if s.name in levels]
    if not chosen:
        return ""
    if fits():
        return _join(chosen, [levels[s.name] for s in chosen], colour)
    texts = [s.forms[levels[s.name]] for s in chosen]
    return _paint(cut(SEPARATOR.join(texts), columns), chosen[0].colour, colour)


def _joined_width(texts: list[str]) -> int:
    return sum(width(t) for t in texts) + len(SEPARATOR) * (len(texts) - 1)


def _paint(s: str, name: str | None, colour: bool) -> str:
    if not colour or not name:
        return s
    return f"\x1b[{SGR[name]}m{s}{RESET}"


def _join(segments: list[Segment], levels: list[int], colour: bool) -> str:
    separator = _paint(SEPARATOR, "dim", colour)
    return separator.join(_paint(s.forms[n], s.colour, colour) for s, n in zip(segments, levels, strict=True))


# ---- the segments ---------------------------------------------------------------------------

def render(payload: dict | None, answer: dict | None, mark: tuple[str, ...] | None, columns: int,
           colour: bool, now: float) -> list[str]:
    """The lines to print. `payload`: Claude Code's JSON (None: none could be read); `answer`:
    the daemon's figures (None: none came); `mark`: why retrod's figures are missing, longest
    form first."""
    columns = max(1, columns)
    today = _today(answer)
    if payload is None:  # empty or garbage on stdin: a minimal line
        note = Segment("mark", mark or ("retrod: no status JSON on stdin", "retrod: no status JSON", "retrod"),
                       "yellow" if mark else "dim")
        return [fit([today, note], ALONE_STEPS, columns, colour)]
    session = answer.get("session") if answer else None
    cc_cost = cost({"cost_usd": get(payload, "cost", "total_cost_usd")})
    work = [_phase(session, now)] if isinstance(session, dict) else []
    work += [_context(payload), _window(payload, "five_hour", "5h", now), _model(payload),
             _window(payload, "seven_day", "7d", now),
             _cache(payload, session.get("cache") if isinstance(session, dict) else None, now), _lines(payload)]
    if isinstance(session, dict):
        money = [_session_cost(session), Segment("cc", [f"Claude Code {cc_cost}", f"CC {cc_cost}"] if cc_cost else (),
                                                 "dim"),
                 today, _efficiency(session), _split(session)]
        steps: Sequence[str] = MONEY_STEPS
    else:  # what Claude Code's JSON alone gives, and why retrod's figures are missing
        elapsed = number(get(payload, "cost", "total_duration_ms"))
        money = [Segment("cc", [f"{cc_cost} session (Claude Code)", f"{cc_cost} (CC)"] if cc_cost else (), "bold"),
                 today, Segment("elapsed", [duration(elapsed / 1000)] if elapsed else (), "dim"),
                 Segment("mark", mark or ("retrod",), "yellow")]
        steps = ALONE_STEPS
    lines = [fit(money, steps, columns, colour), fit(work, WORK_STEPS, columns, colour)]
    return [line for line in lines if line] or [cut("retrod", columns)]


def _today(answer: dict | None) -> Segment:
    today = answer.get("today") if answer else None
    if not isinstance(today, dict):
        return Segment("today", ())
    full, short = cost(today), cost(today, cents=False)
    return Segment("today", [f"today {full}", f"today {short}"] if full else ())


def _session_cost(session: dict) -> Segment:
    shown = cost(session)
    return Segment("cost", [f"{shown} session", shown] if shown else ["cost not priced"], "bold")


def _efficiency(session: dict) -> Segment:
    calls, productive, efficiency = (number(session.get(k)) for k in ("tool_calls", "productive", "efficiency"))
    if not calls or productive is None or efficiency is None:
        return Segment("eff", ())  # no tool calls: nothing to judge
    pct, n, wasted = share(efficiency), int(calls), int(calls - productive)
    name = "green" if efficiency >= 0.9 else "yellow" if efficiency >= 0.75 else "red"
    return Segment("eff", [f"tools {pct} efficient, {wasted} of {n} calls wasted",
                           f"eff {pct} ({wasted} of {n} wasted)", f"eff {pct} ({wasted} wasted)",
                           f"eff {pct} {wasted}w"], name)


def _split(session: dict) -> Segment:
    wall, claude, tool, human = (number(session.get(k)) for k in ("wall_s", "claude_s", "tool_s", "human_s"))
    if not wall or claude is None or tool is None or human is None:
        return Segment("split", ())
    return Segment("split", [f"{duration(wall)}: claude {duration(claude)} tool {duration(tool)} you {duration(human)}",
                             f"claude {duration(claude)} tool {duration(tool)} you {duration(human)}"], "dim")


def _phase(session: dict, now: float) -> Segment:
    phase = session.get("open_phase")
    task = session.get("current_task")
    if not isinstance(phase, dict) and isinstance(task, dict) and text(task.get("name")):
        return _task(task)
    if not isinstance(phase, dict):
        if number(session.get("phases")):
            return Segment("phase", ["no phase open: retrod phase start", "no phase open", "no phase"], "yellow")
        return Segment("phase", ["no phase logged: retrod phase start", "no phase logged", "no phase"], "yellow")
    task, name = text(phase.get("task")) or "?", text(phase.get("phase")) or "?"
    started = number(phase.get("started_at"))
    ran = f" {duration(now - started)}" if started is not None else ""
    return Segment("phase", [f"phase {task} / {name}{ran}", f"{task} / {name}{ran}", f"{name}{ran}",
                             f"{cut(name, SHORT_NAME)}{ran}"], "cyan")


def _task(task: dict) -> Segment:
    """No phase open, but Claude's plan has a task in progress (accounting.md §2.9): its name, cut short
    (a plan's items are sentences), and its cost so far; the nudge to log a phase in the longest form."""
    name = text(task.get("name")) or "?"
    spent = cost(task)
    so_far = f" {spent}" if spent else ""
    return Segment("phase", [f"task {cut(name, TASK_NAME)}{so_far} so far (no phase open)",
                             f"task {cut(name, TASK_NAME)}{so_far}", f"{cut(name, TASK_NAME)}{so_far}",
                             f"{cut(name, SHORT_NAME)}{so_far}"], "cyan")


def _model(payload: dict) -> Segment:
    model = get(payload, "model")
    name = text(get(model, "display_name")) or text(get(model, "id")) or text(model)
    if not name:
        return Segment("model", ())
    effort = get(payload, "effort")
    level = text(get(effort, "level")) or text(effort)
    extras = ", ".join(x for x in (level, "fast" if get(payload, "fast_mode") is True else None) if x)
    return Segment("model", [f"{name} ({extras})" if extras else name, name, cut(name, SHORT_NAME)])


def _context(payload: dict) -> Segment:
    window = get(payload, "context_window")
    pct = number(get(window, "used_percentage"))
    size = number(get(window, "context_window_size"))
    if pct is None and size:  # older 2.x: the current usage, without the share
        usage = get(window, "current_usage")
        used = [number(get(usage, k))
                for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")]
        if all(u is not None for u in used):
            pct = 100 * sum(u or 0 for u in used) / size
    if pct is None:
        return Segment("ctx", ())
    shown = f"ctx {share(pct / 100)}"
    return Segment("ctx", [f"{shown} of {tokens(size)}" if size else shown, shown], share_colour(pct))


def _window(payload: dict, key: str, label: str, now: float) -> Segment:
    window = get(payload, "rate_limits", key)
    pct, resets = number(get(window, "used_percentage")), number(get(window, "resets_at"))
    if pct is None:
        return Segment(label, ())
    if resets is not None and resets > 1e12:  # milliseconds, not seconds
        resets /= 1000
    if resets is not None and resets <= now:
        return Segment(label, ())  # that window is over: its use now is not known
    shown = f"{label} {share(pct / 100)}"
    forms = [f"{shown} (resets in {duration(resets - now)})", f"{shown} {duration(resets - now)}"] if resets else []
    return Segment(label, [*forms, shown], share_colour(pct))


def _cache(payload: dict, ours: object, now: float) -> Segment:
    """The main stream's prompt cache: warm with the time left, or cold with what the next message
    writes again and roughly costs. Claude Code's `prompt_cache` (2.1.251+) knows the real cache:
    when it says warm or cold, that decides, and its expiry counts down; retrod's figures (`ours`:
    accounting.md §2.8's live state, the time left counted here from the last request's time, so that a
    timed refresh moves it) decide otherwise, and give the tokens and dollars of a rewrite."""
    cache = get(payload, "prompt_cache")
    theirs = get(cache, "warm")
    ours = ours if isinstance(ours, dict) else {}
    last, ttl = number(ours.get("last_request_at")), number(ours.get("ttl_s"))
    left = None if last is None or ttl is None else last + ttl - now  # below 0: cold
    if theirs is False:
        left = -1.0
    elif theirs is True:
        expires = number(get(cache, "expires_at"))
        if expires is not None and expires > 1e12:  # milliseconds, not seconds
            expires /= 1000
        if expires is not None:
            left = expires - now  # past it, cold: Claude Code runs the line again then
        elif left is None or left < 0:
            return Segment("cache", ["cache warm"], "green")  # warm, for how long not known
    if left is None:
        return Segment("cache", ())
    if left >= 0:
        return Segment("cache", [f"cache {duration(left)}"], "green")
    rewrites, price = number(ours.get("prefix_tokens")), number(ours.get("rewrite_usd"))
    if rewrites is None:  # Claude Code's count, which has no price
        rewrites, price = number(get(cache, "recache_tokens_if_cold")), None
    if not rewrites or rewrites < 0:
        return Segment("cache", ["cache cold"], "yellow")
    size, cost_ = tokens(rewrites), f" ≈ {usd(price)}" if price is not None and price >= 0 else ""
    return Segment("cache", [f"cache cold: next msg rewrites {size}{cost_}", f"cache cold: rewrites {size}{cost_}",
                             f"cold: {size}{cost_}", "cache cold"], "yellow")


def _lines(payload: dict) -> Segment:
    added, removed = (number(get(payload, "cost", k)) for k in ("total_lines_added", "total_lines_removed"))
    if not added and not removed:
        return Segment("lines", ())
    return Segment("lines", [f"+{int(added or 0)} -{int(removed or 0)}"], "dim")
