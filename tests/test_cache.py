"""Prompt-cache misses priced by cause (accounting.md §2.8): accounting.md §2.8's worked example as a transcript,
hand-built streams for each cause, the shared fixtures' totals, each checked against the
reference (tests/reference.py, written from docs/accounting.md alone) and the report."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest

import reference
from helpers import ingest, reports
from report_checks import cache_mismatches
from retrod.report import cache, markdown, model

SESSION = "c0c0c0c0-0000-4000-8000-000000000001"
SONNET = "claude-sonnet-4-5-20250929"  # $3 input, $3.75 5m write, $6 1h write, $0.30 read per million
OPUS = "claude-opus-4-1-20250805"
DAY = "2025-11-03"


def at(clock: str) -> str:
    return f"{DAY}T{clock}.000Z"


def request(key: str | None, clock: str, read: int, written: int, *, model: str = SONNET, one_hour: bool = False,
            reason: object = None, session: str = SESSION, sidechain: bool = False) -> dict:
    """An assistant line: one request reading `read` and writing `written` cache tokens."""
    usage = {"input_tokens": 3, "output_tokens": 10, "cache_read_input_tokens": read,
             "cache_creation_input_tokens": written,
             "cache_creation": {"ephemeral_5m_input_tokens": 0 if one_hour else written,
                                "ephemeral_1h_input_tokens": written if one_hour else 0}}
    message = {"role": "assistant", "model": model, "usage": usage, "content": [{"type": "text", "text": "ok"}]}
    if key is not None:
        message["id"] = key
    if reason is not None:
        message["diagnostics"] = {"cache_miss_reason": reason}
    return {"type": "assistant", "sessionId": session, "timestamp": at(clock), "isSidechain": sidechain,
            "message": message}


def user(clock: str, session: str = SESSION) -> dict:
    return {"type": "user", "sessionId": session, "timestamp": at(clock), "message": {"role": "user", "content": "go"}}


def boundary(clock: str, session: str = SESSION, sidechain: bool = False) -> dict:
    return {"type": "system", "subtype": "compact_boundary", "sessionId": session, "timestamp": at(clock),
            "isSidechain": sidechain}


def write(path: Path, lines: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def worked_example(root: Path) -> None:
    """accounting.md §2.8's table: one main stream, Sonnet 4.5, 5-minute cache. Request e is written
    before d: at the same time, the key decides (d, then e), never the file's order."""
    write(root / "-p" / f"{SESSION}.jsonl", [
        user("10:00:00"),
        request("msg_a", "10:00:01", 0, 20_000),
        request("msg_b", "10:00:10", 20_000, 1_000),
        user("10:05:59"),
        request("msg_c", "10:06:00", 0, 21_500),
        request("msg_e", "10:06:05", 26_500, 300),
        request("msg_d", "10:06:05", 21_500, 5_000),
        request("msg_f", "10:07:00", 3_000, 19_800, reason="messages_changed"),
    ])


def report_of(db_url: str, root: Path, session: str = SESSION) -> dict:
    ingest(db_url, [root])
    with psycopg.connect(db_url) as conn:
        return model.build(conn, session)


def test_the_worked_example(db_url: str, tmp_path: Path) -> None:
    worked_example(tmp_path)
    # By hand, from accounting.md §2.8's table: c re-writes a's and b's 21,000 after 350 s > 300 s; f reads
    # 3,000 of e's 26,800 and writes 19,800 (lost 23,800). c: 21,000 × ($3.75 − $0.30) / 1e6;
    # f: 19,800 × $3.45 / 1e6.
    expected = {"compaction": {"count": 0, "rewritten": 0, "extra_usd": 0.0},
                "model": {"count": 0, "rewritten": 0, "extra_usd": 0.0},
                "expired": {"count": 1, "rewritten": 21_000, "extra_usd": 0.07245},
                "invalidated": {"count": 1, "rewritten": 19_800, "extra_usd": 0.06831}}
    want = reference.compute_cache(tmp_path)[SESSION]
    assert want["summary"]["misses"] == expected
    got = report_of(db_url, tmp_path)["summary"]["cache"]
    assert got["misses"] == expected
    assert got["waste_usd"] == pytest.approx(0.14076, abs=1e-9)
    read = 20_000 + 21_500 + 26_500 + 3_000
    create = 20_000 + 1_000 + 21_500 + 5_000 + 300 + 19_800
    assert (got["read"], got["create"]) == (read, create)
    assert got["hit_ratio"] == pytest.approx(read / (6 * 3 + read + create), rel=1e-12)
    c, f = sorted(got["costliest"], key=lambda m: m["at"])
    assert c == {"at": "2025-11-03T10:06:00.000Z", "agent": "", "cause": "expired", "reason": None,
                 "rewritten": 21_000, "extra_usd": 0.07245, "pause_s": 350.0, "prefix_before": 21_000}
    assert (f["cause"], f["reason"], f["pause_s"], f["prefix_before"]) == ("invalidated", "messages_changed",
                                                                              55.0, 26_800)
    assert [m["rewritten"] for m in got["costliest"]] == [21_000, 19_800]  # the costlier first


def causes(root: Path) -> None:
    """Each cause once in the main stream, a compaction in a subagent's own file, an hour's
    lifetime, a reason that §2.8 calls no miss, records without a key."""
    agent_file = root / "-p" / SESSION / "subagents" / "agent-worker.jsonl"
    write(root / "-p" / f"{SESSION}.jsonl", [
        user("09:00:00"),
        request("m1", "09:00:01", 0, 30_000, one_hour=True),
        # 10 minutes later, under the hour's lifetime: all re-written → invalidated, not expired
        request("m2", "09:10:01", 0, 30_500, one_hour=True, reason={"type": "system_changed"}),
        boundary("09:20:00"),
        boundary("09:20:30", sidechain=True),  # a sidechain boundary is not the main stream's
        request("m3", "09:20:01", 1_000, 12_000),  # after the boundary: compaction
        request("m4", "09:21:00", 0, 13_000, model=OPUS),  # model switch
        request("m5", "09:21:30", 13_000, 100, model=OPUS, reason="tools_changed"),  # growth: no miss
        # Keyless requests at one time: after the keyed, in line order (k1 then k2).
        request(None, "09:40:00", 0, 14_000, model=OPUS),  # 5-minute writes: 18.5 min → expired
        request(None, "09:40:00", 14_000, 500, model=OPUS),
    ])
    write(agent_file, [
        request("w1", "09:05:00", 0, 8_000, sidechain=True),
        boundary("09:06:00", sidechain=True),
        request("w2", "09:06:30", 0, 9_000, sidechain=True),  # compaction in the agent's file
        request("w3", "09:08:00", 200, 9_500, sidechain=True),  # invalidated
    ])


def test_each_cause_by_hand(db_url: str, tmp_path: Path) -> None:
    causes(tmp_path)
    report = report_of(db_url, tmp_path)
    got = report["summary"]["cache"]
    # By hand: m2 rewrites 30,000 (1h writes: 30,000 × ($6 − $0.30)); m3 rewrites min(12,000,
    # 30,500 − 1,000); m4 min(13,000, 13,000); the first keyless min(14,000, 13,100); w2 8,000
    # (compaction); w3 min(9,500, 9,000 − 200).
    assert {c: (v["count"], v["rewritten"]) for c, v in got["misses"].items()} == {
        "compaction": (2, 12_000 + 8_000), "model": (1, 13_000), "expired": (1, 13_100),
        "invalidated": (2, 30_000 + 8_800)}
    assert got["misses"]["invalidated"]["extra_usd"] == pytest.approx(
        30_000 * 5.70 / 1e6 + 8_800 * 3.45 / 1e6, abs=2e-6)
    assert got["misses"]["compaction"]["extra_usd"] == pytest.approx((12_000 + 8_000) * 3.45 / 1e6, abs=2e-6)
    assert got["waste_usd"] == pytest.approx(
        sum(got["misses"][c]["extra_usd"] for c in ("model", "expired", "invalidated")), abs=2e-6)
    reasons = {m["at"][11:19]: (m["cause"], m["reason"], m["agent"]) for m in got["costliest"]}
    assert reasons["09:10:01"] == ("invalidated", "system_changed", "")
    assert reasons["09:06:30"] == ("compaction", None, "worker")
    assert "09:21:30" not in reasons  # a reason on growth makes no miss
    (worker,) = report["subagents"]
    assert worker["cache"]["misses"]["compaction"]["count"] == 1
    assert worker["cache"]["misses"]["invalidated"]["rewritten"] == 8_800
    want = reference.compute_cache(tmp_path)[SESSION]
    assert got["misses"] == want["summary"]["misses"]
    assert worker["cache"] == _without_sum(want["subagents"]["worker"])


def test_streams_walked_together_keep_each_its_own_lifetime(db_url: str, tmp_path: Path) -> None:
    """Two sessions' streams read in one batch, walked in one transaction, A's with hour-long
    writes. B's first element writes nothing, so the lifetime in force after it is the default
    5 minutes; its second, 6 minutes later, re-writes the 10,000 tokens the first had cached,
    with 5-minute writes, and so does its third 6 minutes after that: both expired (by hand),
    neither invalidated by a lifetime taken from A's stream (as a walk of several streams at
    once, windowed across streams, would take it)."""
    first, second = "a0a0a0a0-0000-4000-8000-000000000001", "b0b0b0b0-0000-4000-8000-000000000002"
    write(tmp_path / "-p" / f"{first}.jsonl", [
        user("09:00:00", session=first),
        request("a1", "09:00:01", 0, 5_000, one_hour=True, session=first),
        request("a2", "09:30:01", 5_000, 100, one_hour=True, session=first),
    ])
    write(tmp_path / "-p" / f"{second}.jsonl", [
        user("10:00:00", session=second),
        request("b1", "10:00:01", 10_000, 0, session=second),
        request("b2", "10:06:01", 0, 10_000, session=second),
        request("b3", "10:12:01", 0, 10_000, session=second),
    ])
    want = reference.compute_cache(tmp_path)
    ingest(db_url, [tmp_path])  # (one batch: both files are small)
    with psycopg.connect(db_url) as conn:
        got = {s: model.build(conn, s)["summary"]["cache"]["misses"] for s in (first, second)}
    assert {c: (v["count"], v["rewritten"]) for c, v in got[second].items() if v["count"]} == {
        "expired": (2, 20_000)}
    assert not any(v["count"] for v in got[first].values())
    assert got == {s: want[s]["summary"]["misses"] for s in (first, second)}


def _without_sum(figures: dict) -> dict:
    return {k: v for k, v in figures.items() if k != "waste"}


def test_the_live_state_is_warm_then_cold(db_url: str, tmp_path: Path) -> None:
    now = datetime.now(UTC)
    session = "c0c0c0c0-0000-4000-8000-000000000002"

    def stamp(seconds_ago: int) -> str:
        return datetime.fromtimestamp(now.timestamp() - seconds_ago, UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")

    lines = [request("l1", "00:00:00", 0, 40_000, session=session), request("l2", "00:00:00", 40_000, 2_000,
                                                                                 session=session)]
    lines[0]["timestamp"], lines[1]["timestamp"] = stamp(200), stamp(100)
    write(tmp_path / "-p" / f"{session}.jsonl", lines)
    report = report_of(db_url, tmp_path, session)
    live = report["summary"]["cache"]["live"]
    assert live["state"] == "warm" and live["ttl_s"] == 300 and live["prefix_tokens"] == 42_000
    assert "When this report was made the cache was warm for 3m" in markdown.render(report)
    assert 180 < live["seconds_left"] <= 200  # 300 s less the ~100 s since l2
    assert live["rewrite_usd"] == pytest.approx(42_000 * 3.45 / 1e6, abs=1e-6)
    lines[0]["timestamp"], lines[1]["timestamp"] = stamp(900), stamp(400)
    write(tmp_path / "-p" / f"{session}.jsonl", lines)
    live = report_of(db_url, tmp_path, session)["summary"]["cache"]["live"]
    assert (live["state"], live["seconds_left"]) == ("cold", 0)
    want = reference.compute_cache(tmp_path, now_us=int(datetime.now(UTC).timestamp() * 1e6))[session]["live"]
    assert (want["state"], want["prefix_tokens"], want["rewrite_usd"]) == ("cold", 42_000, live["rewrite_usd"])


def test_a_session_without_elements_has_no_live_cache(db_url: str, tmp_path: Path) -> None:
    write(tmp_path / "-p" / f"{SESSION}.jsonl", [user("10:00:00")])
    cache = report_of(db_url, tmp_path)["summary"]["cache"]
    assert cache["live"]["state"] == "none" and cache["hit_ratio"] is None and cache["costliest"] == []


def test_the_fixtures_totals(db_url: str, projects: Path) -> None:
    """accounting.md §2.8: 3 compaction misses (60,258 tokens, $0.47), 1 model (9,489, $0.03), 7
    expired (276,489, $1.28), 17 invalidated (307,272, $2.40): waste $3.71 over 10 sessions."""
    ingest(db_url, [projects])
    got = reports(db_url)
    want = reference.compute_cache(projects)
    assert sorted(got) == sorted(want)
    assert [m for session, figures in want.items() for m in cache_mismatches(session, got[session], figures)] == []
    for session, figures in want.items():
        # every miss, in time order (the web UI's timeline marks each one)
        assert [(reference.to_microseconds(datetime.fromisoformat(m["at"])), m["agent"], m["cause"], m["reason"],
                 m["rewritten"], m["prefix_before"]) for m in got[session]["cache_misses"]] == [
            (m["at_us"], m["agent"], m["cause"], m["reason"], m["rewritten"], m["prefix_before"])
            for m in figures["misses"]], session
        assert [m["extra_usd"] for m in got[session]["cache_misses"]] == pytest.approx(
            [float(m["extra"]) for m in figures["misses"]], abs=1e-6), session
    totals = {c: [0, 0, 0.0] for c in reference.CAUSES}
    for report in got.values():
        for cause, v in report["summary"]["cache"]["misses"].items():
            totals[cause][0] += v["count"]
            totals[cause][1] += v["rewritten"]
            totals[cause][2] += v["extra_usd"]
    assert {c: (n, r, round(usd, 2)) for c, (n, r, usd) in totals.items()} == {
        "compaction": (3, 60_258, 0.47), "model": (1, 9_489, 0.03), "expired": (7, 276_489, 1.28),
        "invalidated": (17, 307_272, 2.40)}
    wasteful = [r["summary"]["cache"]["waste_usd"] for r in got.values() if r["summary"]["cache"]["waste_usd"]]
    assert (len(wasteful), round(sum(wasteful), 2)) == (10, 3.71)


def test_the_markdown_names_the_waste_and_the_costliest_misses(db_url: str, tmp_path: Path) -> None:
    worked_example(tmp_path)
    text = markdown.render(report_of(db_url, tmp_path))
    section = text.split("## Prompt Cache", 1)[1].split("\n## ", 1)[0]
    # By hand: 71,000 read over 18 input + 71,000 read + 67,600 written = 138,618 → 51.2%: 51%.
    assert "Hit ratio 51%: 71,000 tokens read from the cache, 67,600 written to it." in section
    assert "| Pause past the cache's lifetime | 1 | 21,000 | $0.07 |" in section
    assert "| Prefix changed or dropped | 1 | 19,800 | $0.07 |" in section
    assert "After a compaction" not in section  # no such miss: no row
    assert "| 11-03 10:06:00 | main | expired | 5m 50s | 21,000 | 21,000 | $0.07 |" in section
    assert "| 11-03 10:07:00 | main | invalidated (messages_changed) | 55s | 26,800 | 19,800 | $0.07 |" in section
    # Made long after 10:07: the cache is cold, and the next message writes f's 22,800 again.
    assert ("When this report was made the cache was cold: the next message writes 22,800 tokens again"
            " (≈ $0.08 more than reading it).") in section
    summary = text.split("## Summary", 1)[1].split("\n## ", 1)[0]
    assert "; prompt-cache waste $0.14, " in summary and "% of it (see *Prompt Cache*)." in summary


def test_files_read_under_older_rules_gain_their_reasons_and_boundaries(db_url: str, tmp_path: Path) -> None:
    """A database from before migration 0024: requests without reasons, no boundary rows, files
    read under fold rules 2. They are read again from their start (requests kept) and end as one pass."""
    causes(tmp_path)
    want = report_of(db_url, tmp_path)["summary"]["cache"]
    with psycopg.connect(db_url) as conn:
        conn.execute("UPDATE retrod.requests SET cache_miss_reason = NULL")
        conn.execute("DELETE FROM retrod.cache_boundaries")
        conn.execute("UPDATE retrod.files SET state = jsonb_set(state, '{rules}', '2')"
                     " WHERE kind IN ('main', 'subagent', 'agent_root') AND \"offset\" > 0")
    got = report_of(db_url, tmp_path)["summary"]["cache"]
    assert got["misses"] == want["misses"] and got["misses"]["compaction"]["count"] == 2
    assert got["costliest"] == want["costliest"]


def test_the_lifetime_in_force_follows_the_latest_write() -> None:
    """The walk alone (no database): an hour's lifetime holds through reads, a write mixing 5m
    and 1h tokens ends in 5 minutes, and writes whose split does not add up count as 5m (for
    lifetime and price alike); each stream starts afresh."""
    from retrod.report import cache, prices

    def element(agent: str, minute: int, read: int, five: int, hour: int, written: int | None = None) -> tuple:
        ts = datetime(2025, 11, 3, 10, 0, tzinfo=UTC) + timedelta(minutes=minute)
        return (agent, ts, SONNET, False, 3, read, five + hour if written is None else written, five, hour, None)

    rows = [
        element("", 0, 0, 0, 10_000),  # 1h writes alone: an hour
        element("", 1, 10_000, 0, 0),  # reads only: the hour holds
        element("", 21, 0, 0, 10_000),  # 20 min: within the hour → invalidated (1h rewrite)
        element("", 22, 10_000, 100, 100),  # writes 5m and 1h: 5 minutes
        element("", 32, 0, 0, 10_200),  # 10 min > 5 → expired
        element("", 33, 10_200, 0, 500, written=900),  # split 0 + 500 ≠ 900: all 5m → 5 minutes
        element("", 43, 0, 0, 11_100),  # 10 min > 5 → expired
        element("sub", 43, 0, 50_000, 0),  # another stream: its first element is no miss
        element("sub", 44, 0, 50_000, 0),  # → invalidated, 5m rewrite
    ]
    found, last = cache.walk(rows, [], prices.DEFAULT)
    assert [(m.at.minute, m.agent, m.cause, m.rewritten, m.prefix_before) for m in found] == [
        (21, "", "invalidated", 10_000, 10_000), (32, "", "expired", 10_200, 10_200),
        (43, "", "expired", 11_100, 11_100), (44, "sub", "invalidated", 50_000, 50_000)]
    # By hand at Sonnet 4.5's list prices: 1h write $6, 5m write $3.75, read $0.30 per million.
    assert [float(m.extra) for m in found] == pytest.approx(
        [10_000 * 5.70e-6, 10_200 * 5.70e-6, 11_100 * 5.70e-6, 50_000 * 3.45e-6], abs=1e-9)
    assert last is not None and (last.at.minute, last.prefix, last.ttl_s) == (43, 11_100, 3600)


def test_phases_count_the_misses_whose_request_falls_in_them(db_url: str, tmp_path: Path) -> None:
    """accounting.md §2.8: a phase's figures are its window's requests and the misses whose element's
    request falls in it (§2.5's windows), against the reference."""
    from retrod import tracking

    causes(tmp_path)
    ingest(db_url, [tmp_path])
    windows = [(datetime(2025, 11, 3, 9, 0, tzinfo=UTC), datetime(2025, 11, 3, 9, 20, 1, tzinfo=UTC)),
               (datetime(2025, 11, 3, 9, 20, 1, tzinfo=UTC), datetime(2025, 11, 3, 9, 40, tzinfo=UTC))]
    with psycopg.connect(db_url) as conn:
        for n, (start, end) in enumerate(windows):
            tracking.phase_log(conn, SESSION, "t", f"p{n}", start, end, "high_impact", tracking.PhaseNotes())
        report = model.build(conn, SESSION)
    want = reference.compute_cache(tmp_path, windows={SESSION: windows})[SESSION]["phases"]
    got = [phase["cache"] for phase in report["phases"]]
    assert got == [_without_sum(w) for w in want]
    # By hand: the first window holds m2 (invalidated) and w2 (compaction, 09:06:30) and w3;
    # m3 at 09:20:01 starts the second, with m4; the keyless pair at 09:40 is in neither.
    assert [{c: v["count"] for c, v in g["misses"].items()} for g in got] == [
        {"compaction": 1, "model": 0, "expired": 0, "invalidated": 2},
        {"compaction": 1, "model": 1, "expired": 0, "invalidated": 0}]


@pytest.mark.parametrize(("diagnostics", "reason"), [
    ({"cache_miss_reason": "messages_changed"}, "messages_changed"),
    ({"cache_miss_reason": {"type": "system_changed", "detail": 3}}, "system_changed"),
    ({"cache_miss_reason": {"type": 7}}, None),
    ({"cache_miss_reason": 5}, None),
    ({"cache_miss_reason": ""}, None),
    (None, None),
    ("not an object", None),
])
def test_claude_codes_reason_is_a_string_or_an_objects_type(diagnostics: object, reason: str | None) -> None:
    """accounting.md §2.8: message.diagnostics.cache_miss_reason, a string or an object whose `type` is
    one; anything else is no reason, and never costs the line its usage."""
    from retrod.transcript.parser import parse_line

    line = {"type": "assistant", "message": {"id": "m", "usage": {"input_tokens": 4}, "diagnostics": diagnostics}}
    entry = parse_line(json.dumps(line).encode())
    assert entry is not None and entry.msg.usage is not None and entry.msg.usage.input == 4
    assert entry.msg.cache_miss_reason == reason


def test_each_tasks_misses_are_those_in_its_windows() -> None:
    """accounting.md §2.8 over a task's windows (§2.9): cache.in_tasks looks each miss up once among
    every task's windows, and gives each task the misses in_window finds in its windows, in order."""
    base = datetime(2026, 3, 1, 10, tzinfo=UTC)

    def t(m: float) -> datetime:
        return base + timedelta(minutes=m)

    misses = [cache.Miss(t(m), "", "ttl", None, 1, Decimal(0), 0, 0) for m in (0, 1, 2, 5, 9, 10, 12, 20, 31, 40)]
    tasks = [[[t(1), t(5)], [t(10), t(12)]], [[t(5), t(9)], [t(30), None]], [[t(12), t(20)]]]  # never overlapping
    now = t(35)
    windows = sorted(((s, e, i) for i, task in enumerate(tasks) for s, e in task), key=lambda w: w[0])
    assert cache.in_tasks(misses, windows, len(tasks), now) == [
        [m for s, e in task for m in cache.in_window(misses, s, e, now)] for task in tasks]
    assert [[m.at for m in found] for found in cache.in_tasks(misses, windows, len(tasks), now)] == [
        [t(1), t(2), t(10)], [t(5), t(31)], [t(12)]]
