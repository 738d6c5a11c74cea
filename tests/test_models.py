"""Tokens by model and their estimated cost (issues 11 and 19). A request's parts (its
iterations, accounting.md §2.2) count under their own models; each part is priced by the genai-prices
package at its request's day, its own size (long-context tiers) and speed (fast mode), when a
report is read (§2.7), a RETROD_PRICES file overriding it by model, and never guessed.

Expected figures come from the independent reference (tests/reference.py, which calls the
package per part) or are worked out by hand in the comments from the rates the package holds,
never from the implementation."""

from __future__ import annotations

import itertools
import json
import os
import random
import subprocess
import sys
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest
from genai_prices import Usage, calc_price
from genai_prices.data import providers
from genai_prices.types import TimeOfDateConstraint
from psycopg_pool import ConnectionPool

import reference
from helpers import HOST, ingest, older_migrations, reports, rollups_match_raw, snapshot
from retrod.fastpath import client
from retrod.fastpath.server import ReportServer
from retrod.history import trends
from retrod.report import model, timeline
from retrod.report import prices as pricing
from retrod.settings import Settings
from retrod.statusline import figures as statusline
from retrod.store import tiers
from retrod.ui import data

SPOTTER = "258c7280-ae70-4798-800f-63464d01a85d"
FIGURES = ("requests", "input", "output", "cache_read", "cache_create", "cache_create_5m", "cache_create_1h",
           "web_searches", "cost_usd")
# Every model the fixture transcripts name (tests/fixtures/SOURCES.md).
FIXTURE_MODELS = {"claude-opus-4-6", "claude-sonnet-4-20250514", "claude-sonnet-4-5-20250929",
                  "claude-opus-4-5-20251101", "claude-opus-4-7", "claude-haiku-4-5-20251001",
                  "claude-opus-4-20250514", "claude-opus-4-1-20250805", "claude-sonnet-5"}
ANTHROPIC = next(p for p in providers if p.id == "anthropic")


def by_model(rows: list[dict]) -> dict:
    return {row["model"]: {f: row[f] for f in FIGURES} for row in rows}


# ---- the price data ------------------------------------------------------------------------------


def test_the_package_prices_every_fixture_model_and_changes_prices_only_by_date() -> None:
    for name in FIXTURE_MODELS | {"claude-sonnet-4-6", "claude-opus-4-8", "claude-opus-5", "claude-fable-5"}:
        price = calc_price(Usage(input_tokens=1000), name, provider_id="anthropic",
                           genai_request_timestamp=datetime(2026, 6, 1, tzinfo=UTC))
        assert price.total_price > 0, name
    # A report sums parts by day: exact only while no Anthropic price changes within a day.
    for m in ANTHROPIC.models:
        conditions = [c.constraint for c in m.prices] if isinstance(m.prices, list) else []
        conditions += [v.constraint for v in m.price_variants or ()]
        assert not any(isinstance(c, TimeOfDateConstraint) for c in conditions), m.id
    assert 200_000 in pricing.thresholds()  # the long-context tier (e.g. Opus 4.6 before 2026-03-13)


def test_a_group_of_parts_costs_what_its_parts_cost_one_by_one() -> None:
    """The report prices sums of parts that share a model, day, speed and price tier: the same
    dollars, to the last digit, as calc_price on each part (random parts of every Anthropic
    model, unknown ones too, over two years, fast or not, around the tier thresholds, with web
    searches: accounting.md §2.7's web-search unit; a model without a web-search price leaves them
    unpriced, its tokens priced — docs/decisions.md; and splits that do not add up, whose writes
    are all 5m ones)."""
    rnd = random.Random(19)
    names = [m.id for m in ANTHROPIC.models] + ["claude-opus-4-6-20260205", "claude-imaginary-9"]
    groups: dict[tuple, list[dict]] = {}
    for _ in range(1500):
        cc = rnd.choice([0, rnd.randrange(0, 120_000)])
        part = {"input": rnd.choice([0, 1, rnd.randrange(0, 260_000)]), "output": rnd.randrange(0, 40_000),
                "cache_read": rnd.choice([0, rnd.randrange(0, 260_000)]), "cache_create": cc,
                "cache_create_1h": rnd.choice([0, rnd.randrange(0, cc + 1)]),
                "web_searches": rnd.choice([0, 0, 0, rnd.randrange(1, 40)])}
        part["cache_create_5m"] = cc - part["cache_create_1h"]
        if rnd.random() < 0.1:  # a split that does not add up: all of its writes are 5m ones (§2.7)
            part["cache_create_5m"] = max(0, part["cache_create_5m"] + rnd.choice([-1, 1]) * rnd.randrange(1, 500))
        adds_up = part["cache_create_5m"] + part["cache_create_1h"] == cc
        part["priced_1h"] = part["cache_create_1h"] if adds_up else 0
        size = part["input"] + part["cache_read"] + part["cache_create"]
        floor = max([t for t in pricing.thresholds() if size > t], default=0)
        key = (rnd.choice(names), date(2025, 9, 1) + timedelta(days=rnd.randrange(0, 600)), rnd.random() < 0.3, floor)
        groups.setdefault(key, []).append(part)
    for (name, day, fast, floor), parts in groups.items():
        want, unpriced = Decimal(0), False
        for part in parts:
            try:
                one = calc_price(Usage(input_tokens=part["input"] + part["cache_read"] + part["cache_create"],
                                       output_tokens=part["output"], cache_read_tokens=part["cache_read"],
                                       cache_write_tokens=part["cache_create"],
                                       cache_write_1h_tokens=part["priced_1h"],
                                       web_searches=part["web_searches"]),
                                 name, provider_id="anthropic",
                                 genai_request_timestamp=datetime.combine(day, time(rnd.randrange(24)), UTC),
                                 price_context={"speed": "fast"} if fast else None)
            except LookupError:
                want, unpriced = Decimal(0), True
                break
            want += one.total_price  # (the package prices searches its model has no price for at 0)
            unpriced = unpriced or (part["web_searches"] > 0 and one.model_price.web_searches_kcount is None)
        summed = {f: sum(p[f] for p in parts) for f in (*pricing.TOKENS, pricing.PRICED_1H)}
        searches = sum(p["web_searches"] for p in parts)
        got = pricing.group_cost(pricing.DEFAULT, name, day, fast, floor, summed, len(parts), searches)
        assert got == (want, unpriced), name
    assert any(p["web_searches"] for ps in groups.values() for p in ps)
    assert any(p["priced_1h"] != p["cache_create_1h"] for ps in groups.values() for p in ps)


# ---- the fixture corpus against the reference -------------------------------------------------


def test_every_fixture_session_splits_and_prices_its_tokens_as_the_reference(db_url: str, projects: Path) -> None:
    ingest(db_url, [projects])
    got, want = reports(db_url), reference.compute(projects)
    seen: set = set()
    for session, expected in want.items():
        summary = got[session]["summary"]
        rows = summary["tokens_by_model"]
        assert by_model(rows) == expected["tokens_by_model"], session
        assert rows == sorted(rows, key=lambda r: (-r["output"], r["model"] or "")), session
        assert summary["cost"] == expected["cost"], session
        seen |= set(expected["tokens_by_model"])
    assert FIXTURE_MODELS | {"<synthetic>"} <= seen  # the corpus exercises every model
    assert got[SPOTTER]["prices"] == {"source": "genai-prices", "version": pricing.package_version(),
                                      "override": None}


def _log_phases(db_url: str, session: str, windows: list[tuple[datetime, datetime]]) -> None:
    with psycopg.connect(db_url) as conn:
        conn.execute("INSERT INTO cc_sessions (session_uuid, project_slug, started_at) VALUES (%s, 'p', %s)",
                     (session, windows[0][0]))
        for i, (start, end) in enumerate(windows):
            conn.execute("INSERT INTO cc_session_phases (session_id, task, phase, started_at, ended_at, verdict)"
                         " SELECT id, 't', %s, %s, %s, 'small_impact' FROM cc_sessions WHERE session_uuid = %s",
                         (str(i), start, end, session))


def test_phase_windows_split_and_price_by_model_as_the_reference(db_url: str, projects: Path) -> None:
    ingest(db_url, [projects])
    # The session using the most models, cut into windows whose edges fall inside minutes.
    want = reference.compute(projects)
    session = max(want, key=lambda s: (len(want[s]["tokens_by_model"]), want[s]["summary"]["requests"]))
    assert len(want[session]["tokens_by_model"]) >= 2
    with psycopg.connect(db_url) as conn:
        first, last = conn.execute("SELECT min(ts), max(ts) FROM retrod.requests WHERE session_uuid = %s",
                                   (session,)).fetchone()
    step = (last - first) / 3
    cuts = [first - timedelta(seconds=1), first + step + timedelta(seconds=7.25), first + 2 * step,
            last + timedelta(microseconds=1)]
    windows = list(itertools.pairwise(cuts)) + [(first + timedelta(seconds=10.5), first + step)]
    _log_phases(db_url, session, windows)
    with psycopg.connect(db_url) as conn:
        got = sorted(model.build(conn, session)["phases"], key=lambda p: int(p["phase"]))  # as logged
    expected = reference.compute_phase_models(projects, session, windows, with_cost=True)
    assert [by_model(p["tokens_by_model"]) for p in got] == [e["tokens_by_model"] for e in expected]
    assert [p["cost"] for p in got] == [e["cost"] for e in expected]
    assert sum(len(e["tokens_by_model"]) for e in expected) >= 4  # several models, spread over the windows


# ---- hand-written transcripts -------------------------------------------------------------------

A = "aaaaaaaa-1111-4000-8000-000000000001"
B = "bbbbbbbb-1111-4000-8000-000000000002"


def at(second: float) -> str:
    return (datetime(2026, 3, 1, tzinfo=UTC) + timedelta(seconds=second)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def record(key: str, second: float, use: dict, model_name: str | None = None, session: str = A, **extra) -> dict:
    message = {"id": key, "role": "assistant", "content": [], "usage": use}
    if model_name is not None:
        message["model"] = model_name
    return {"type": "assistant", "sessionId": session, "timestamp": at(second), "message": message, **extra}


def usage(inp: int = 0, out: int = 0, cr: int = 0, cc: int = 0, five: int | None = None,
          hour: int | None = None) -> dict:
    use = {"input_tokens": inp, "output_tokens": out, "cache_read_input_tokens": cr,
           "cache_creation_input_tokens": cc}
    if five is not None or hour is not None:
        use["cache_creation"] = {"ephemeral_5m_input_tokens": five or 0, "ephemeral_1h_input_tokens": hour or 0}
    return use


def write(path: Path, lines: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def session_report(db_url: str, session: str = A) -> dict:
    with psycopg.connect(db_url) as conn:
        return model.build(conn, session)


def test_the_usage_winning_record_names_the_model_in_any_order_and_chunking(db_url: str, tmp_path: Path) -> None:
    snapshots = [
        record("m1", 1, usage(10, 1), "claude-haiku-4-5-20251001"),  # a first snapshot
        record("m1", 2, usage(10, 50), "claude-opus-4-6"),  # the final one: its model counts
        record("m2", 3, usage(1, 4), "claude-sonnet-5"),  # m2: three records with one usage
        record("m2", 3, usage(1, 4)),
        record("m2", 3, usage(1, 4), "claude-opus-4-7"),
        record("m3", 4, usage(2, 3)),  # names no model: unknown
        record("m4", 5, usage(), "<synthetic>"),  # Claude Code's own entry, zero tokens
    ]
    root = tmp_path / "projects"
    # accounting.md §2.2: m2's records tie on the usage tuple, so the first line of the file counts
    # (one file: the path ties), whatever it holds: sonnet-5 written first, opus-4-7 first in
    # the reversed file, sonnet-5 first in the third order (lines 2, 4, 6, 1, 3, 5, 0).
    orders = [(snapshots, "claude-sonnet-5"), (snapshots[::-1], "claude-opus-4-7"),
              (snapshots[2::2] + snapshots[1::2] + snapshots[:1], "claude-sonnet-5")]
    for n, (lines, first_m2) in enumerate(orders):
        want = {
            "claude-opus-4-6": {"requests": 1, "input": 10, "output": 50},
            first_m2: {"requests": 1, "input": 1, "output": 4},
            None: {"requests": 1, "input": 2, "output": 3},
            "<synthetic>": {"requests": 1, "input": 0, "output": 0},
        }
        path = root / "-p" / f"{A}.jsonl"
        with psycopg.connect(db_url) as conn:  # start over: the same records in another order
            conn.execute("TRUNCATE retrod.files, retrod.requests CASCADE")
        write(path, [])
        for line in lines:  # one line per ingest: each record meets the stored one in the upsert
            with path.open("a") as f:
                f.write(json.dumps(line) + "\n")
            ingest(db_url, [root])
        got = {row["model"]: {k: row[k] for k in ("requests", "input", "output")}
               for row in session_report(db_url)["summary"]["tokens_by_model"]}
        assert got == want, n
        assert list(got) == ["claude-opus-4-6", first_m2, None, "<synthetic>"]  # by output
        rollups_match_raw(db_url)
        assert reference.compute(root)[A]["tokens_by_model"].keys() == want.keys()


def test_a_copy_in_another_file_ties_with_the_subagents_own_record(db_url: str, tmp_path: Path) -> None:
    root = tmp_path / "projects"
    # An agent_progress copy names no model; the subagent file's record of the same request (both
    # sidechain records, the same usage) names one. They tie on the usage tuple: the first by
    # path below the root counts, `-p/<A>.jsonl` before `-p/<A>/subagents/…` ("." < "/"), in
    # either order of arrival: the request names no model.
    progress = {"type": "progress", "sessionId": A, "timestamp": at(1), "data": {
        "type": "agent_progress", "agentId": "s1",
        "message": {"type": "assistant", "timestamp": at(1), "message": {"id": "k", "usage": usage(7, 8)}}}}
    copy = record("k", 1, usage(7, 8), "claude-haiku-4-5-20251001", isSidechain=True)
    for first, second in (((f"{A}.jsonl",), progress), ((A, "subagents", "agent-s1.jsonl"), copy)), \
                         (((A, "subagents", "agent-s1.jsonl"), copy), ((f"{A}.jsonl",), progress)):
        with psycopg.connect(db_url) as conn:
            conn.execute("TRUNCATE retrod.files, retrod.requests CASCADE")
        root = tmp_path / f"projects-{len(first[0])}"
        write(root.joinpath("-p", *first[0]), [first[1]])
        ingest(db_url, [root])
        write(root.joinpath("-p", *second[0]), [second[1]])
        ingest(db_url, [root])
        (row,) = session_report(db_url)["summary"]["tokens_by_model"]
        assert (row["model"], row["requests"], row["output"]) == (None, 1, 8)
        assert reference.compute(root)[A]["tokens_by_model"].keys() == {None}
        rollups_match_raw(db_url)


def test_records_tying_on_the_usage_tuple_go_by_path_then_line_not_by_speed(db_url: str, tmp_path: Path) -> None:
    """accounting.md §2.2: records whose usage tuples tie — one fast, one standard, with other models —
    are told apart by their file's path below the projects root, then line; never by what
    they hold. f1: `-a/<A>.jsonl` line 1 (standard, sonnet-4-5) before `-b/<B>.jsonl` line 0
    (fast, opus-4-6). f2: in `-b/<B>.jsonl`, line 1 (fast, opus-4-6) before line 2 (standard,
    haiku). Both main-transcript records (the copy in B is copied history: still no sidechain)."""
    tie = usage(1000, 200)
    a_lines = [record("a0", 1, usage(1, 1), "claude-sonnet-4-5-20250929"),
               record("f1", 2, tie, "claude-sonnet-4-5-20250929")]
    fast_use = {**tie, "speed": "fast"}
    b_lines = [record("f1", 2, fast_use, "claude-opus-4-6", session=A),
               record("f2", 3, fast_use, "claude-opus-4-6", session=B),
               record("f2", 3, tie, "claude-haiku-4-5-20251001", session=B)]
    whole = tmp_path / "whole"
    write(whole / "-a" / f"{A}.jsonl", a_lines)
    write(whole / "-b" / f"{B}.jsonl", b_lines)
    want = reference.compute(whole)
    # f1 is A's (its owner: the own record), standard sonnet-4-5; f2 is B's, fast opus-4-6
    assert set(want[A]["tokens_by_model"]) == {"claude-sonnet-4-5-20250929"}
    assert set(want[B]["tokens_by_model"]) == {"claude-opus-4-6"}
    expected = {s: {m: {f: v for f, v in row.items() if f in FIGURES} for m, row in want[s]["tokens_by_model"].items()}
                for s in (A, B)}
    rng = random.Random(35)
    for n, order in enumerate((("-b", "-a"), ("-a", "-b"), ("-b", "-a"))):
        with psycopg.connect(db_url) as conn:
            conn.execute("TRUNCATE retrod.files, retrod.requests CASCADE")
        root = tmp_path / f"steps-{n}"
        for folder in order:  # each file in random chunks, one ingest each
            name = f"{A if folder == '-a' else B}.jsonl"
            data = (whole / folder / name).read_bytes()
            cuts = sorted(rng.sample(range(1, len(data)), 2)) + [len(data)]
            for cut in cuts:
                write((root / folder / name), [])
                (root / folder / name).write_bytes(data[:cut])
                ingest(db_url, [root], batch_bytes=64 if n == 2 else 4 << 20)
        got = reports(db_url)
        assert {s: by_model(got[s]["summary"]["tokens_by_model"]) for s in (A, B)} == expected, order
        assert {s: got[s]["summary"]["cost"] for s in (A, B)} == {s: want[s]["cost"] for s in (A, B)}, order
        rollups_match_raw(db_url)


# Hand-priced session, on 2026-03-01, at genai-prices' rates (USD per million), written out here:
#   claude-opus-4-6            input 5, output 25, cache read 0.50, 5m write 6.25, 1h write 10
#                              (below 200,000 input tokens; before 2026-03-13 a larger part
#                              pays 10, 37.5, 1, 12.5, 20)
#   claude-haiku-4-5-20251001  input 1, output 5,  cache read 0.10, 5m write 1.25, 1h write 2
PRICED = [
    # opus: 1,000 in, 2,000 out, 100,000 cache read, 3,000 written (1,000 for 5 minutes, 2,000 for an hour)
    record("p1", 1, usage(1000, 2000, 100_000, 3000, five=1000, hour=2000), "claude-opus-4-6"),
    # haiku: 500 in, 100 out, 400 written with no split: at the 5-minute price
    record("p2", 2, usage(500, 100, 0, 400), "claude-haiku-4-5-20251001"),
    record("p3", 3, usage(100, 1000), "claude-imaginary-9"),  # no price knows it
    record("p4", 4, usage(0, 0), "<synthetic>"),  # zero tokens: costs nothing, priced or not
    record("p5", 5, usage(30, 20)),  # names no model
]
# opus:  1,000×5 + 2,000×25 + 100,000×0.50 + 1,000×6.25 + 2,000×10 = 5,000 + 50,000 + 50,000 + 6,250
#        + 20,000 = 131,250 per million = $0.13125
# haiku: 500×1 + 100×5 + 400×1.25 = 500 + 500 + 500 = 1,500 per million = $0.0015
OPUS_USD, HAIKU_USD = 0.13125, 0.0015


@pytest.fixture
def priced(db_url: str, tmp_path: Path) -> dict:
    """A session with priced, unpriced and model-less requests, and the command's environment."""
    root = tmp_path / "projects"
    write(root / "-p" / f"{A}.jsonl", PRICED)
    ingest(db_url, [root])
    env = {k: v for k, v in os.environ.items() if not k.startswith("RETROD_")}
    env.update(RETROD_DATABASE_URL=db_url, RETROD_PROJECTS_DIR=str(root), RETROD_HOST_ID=HOST,
               RETROD_DATA_DIR=str(tmp_path / "data"), RETROD_REPORTS_DIR=str(tmp_path / "reports"),
               HOME=str(tmp_path / "home"))
    return env


def retrod(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "retrod", *args], env=env, capture_output=True, text=True,
                          timeout=120)


def json_report(env: dict) -> dict:
    done = retrod(env, "report", A, "--format", "json", "--no-save")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_cost_by_hand_with_a_model_no_price_knows(priced: dict) -> None:
    report = json_report(priced)
    rows = {r["model"]: r for r in report["summary"]["tokens_by_model"]}
    assert rows["claude-opus-4-6"]["cost_usd"] == OPUS_USD
    assert rows["claude-haiku-4-5-20251001"]["cost_usd"] == HAIKU_USD
    assert rows["claude-imaginary-9"]["cost_usd"] is None  # never guessed
    assert rows[None]["cost_usd"] is None and rows[None]["requests"] == 1
    assert rows["<synthetic>"]["cost_usd"] == 0
    assert report["summary"]["cost"] == {
        "usd": pytest.approx(OPUS_USD + HAIKU_USD, abs=1e-9),
        "unknown_models": [None, "claude-imaginary-9"],  # the line that named none first
        "complete": False}

    markdown = retrod(priced, "report", A, "--no-save").stdout
    section = markdown[markdown.index("## Tokens by Model"):]
    assert markdown.index("| Cache create |") < markdown.index("## Tokens by Model")  # after the token table
    assert "| `claude-opus-4-6` | 1 | 2,000 | 1,000 | 100,000 | 3,000 | 2,000 | $0.13 |" in section
    assert "| `claude-imaginary-9` | 1 | 1,000 | 100 | 0 | 0 | 0 | not priced |" in section
    assert "| unknown | 1 | 20 | 30 | 0 | 0 | 0 | not priced |" in section
    assert "| `<synthetic>` | 1 | 0 | 0 | 0 | 0 | 0 | $0.00 |" in section
    assert "| **Total** | 5 | 3,120 | 1,630 | 100,000 | 3,400 | 2,000 | **≥ $0.13** |" in section
    assert f"Estimated from genai-prices {pricing.package_version()}" in section and "not a bill" in section


def test_a_prices_file_overrides_the_package_for_the_models_it_names(priced: dict, tmp_path: Path) -> None:
    override = tmp_path / "my-prices.json"
    override.write_text(json.dumps({"date": "2027-01-01", "models": {
        "claude-opus-4-6": {"input": 5, "output": 30, "cache_read": 0.5, "cache_create_5m": 6.25,
                            "cache_create_1h": 10},
        "claude-imaginary-9": {"input": 2, "output": 8, "cache_read": 0.2, "cache_create_5m": 2.5,
                               "cache_create_1h": 4}}}))
    report = json_report(dict(priced, RETROD_PRICES=str(override)))
    rows = {r["model"]: r for r in report["summary"]["tokens_by_model"]}
    # opus at 30 per million output: 131,250 + 2,000×5 = 141,250 per million
    assert rows["claude-opus-4-6"]["cost_usd"] == 0.14125
    # imaginary: 100×2 + 1,000×8 = 8,200 per million
    assert rows["claude-imaginary-9"]["cost_usd"] == 0.0082
    assert rows["claude-haiku-4-5-20251001"]["cost_usd"] == HAIKU_USD  # the package's price still applies
    assert report["summary"]["cost"] == {"usd": pytest.approx(0.14125 + 0.0082 + HAIKU_USD, abs=1e-9),
                                         "unknown_models": [None], "complete": False}
    assert report["prices"] == {"source": "genai-prices", "version": pricing.package_version(),
                                "override": str(override)}


RATES = {"input": 1, "output": 2, "cache_read": 0.1, "cache_create_5m": 1.25, "cache_create_1h": 2}
BAD_PRICES = [
    ("{not json", "not JSON"),
    ('{"models": {"claude-x": {"input": 1, "output": 2, "cache_read": 0.1, "cache_create_5m": 1.25}}}',
     "no 'cache_create_1h' price"),
    (json.dumps({"models": {"claude-x": dict(RATES, input=-1)}}), "input must be a number from 0 to 1,000,000"),
    # the value as the file has it, not as Python writes it (issue 20)
    (json.dumps({"models": {"claude-x": dict(RATES, input=True)}}), "1,000,000 (USD per million tokens), not true"),
    # found in review: a typo this large passed, then failed the rounding of every report
    (('{"models": {"claude-x": {"input": 1e30, "output": 2, "cache_read": 0.1, "cache_create_5m": 1.25,'
     ' "cache_create_1h": 2}}}'), "input must be a number from 0 to 1,000,000 (USD per million tokens), not 1E+30"),
    ('{"date": "last year", "models": {}}', '"date" must be a date'),
    ('{"modles": {}}', "unknown key 'modles'"),
    ("[]", "must be a JSON object"),
    (None, "cannot read it"),  # no such file
]


@pytest.mark.parametrize(("content", "problem"), BAD_PRICES)
def test_a_bad_prices_file_is_one_line_naming_it(priced: dict, tmp_path: Path, content: str | None,
                                                 problem: str) -> None:
    path = tmp_path / "prices.json"
    if content is not None:
        path.write_text(content)
    done = retrod(dict(priced, RETROD_PRICES=str(path)), "report", A, "--no-save")
    assert done.returncode == 2, done.stderr  # as any other bad setting
    assert done.stdout == ""
    assert done.stderr.startswith(f"retrod: error: configuration: RETROD_PRICES={path}: "), done.stderr
    assert problem in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_the_daemons_report_server_uses_the_commands_prices_file(priced: dict, db_url: str, tmp_path: Path,
                                                                 monkeypatch) -> None:
    for name in [k for k in os.environ if k.startswith("RETROD_")]:
        monkeypatch.delenv(name)
    for name, value in priced.items():
        if name.startswith("RETROD_"):
            monkeypatch.setenv(name, value)
    bad = tmp_path / "bad.json"
    bad.write_text('{"models": {"claude-x": {}}}')
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"models": {"claude-imaginary-9": {
        "input": 2, "output": 8, "cache_read": 0.2, "cache_create_5m": 2.5, "cache_create_1h": 4}}}))
    # The client sends the file's absolute path: relative to the command's folder, not the daemon's.
    monkeypatch.chdir(tmp_path)
    sent = client.request({"session": A, "format": "json", "output": None, "no_save": True, "close": False},
                          {"RETROD_PRICES": "good.json", "RETROD_DATABASE_URL": db_url})
    assert sent["RETROD_PRICES"] == str(good)
    with ConnectionPool(db_url, min_size=1, max_size=2, open=True) as pool:
        server = ReportServer(pool, Settings())

        def answer(**extra: str) -> tuple[str, str, str]:
            return server.answer({"session": A, "format": "json", "pid": str(os.getpid()),
                                  "database_url": db_url, **extra})

        code, stderr, stdout = answer(RETROD_PRICES=str(bad))
        assert (code, stdout) == ("2", "")
        assert stderr.startswith(f"retrod: error: configuration: RETROD_PRICES={bad}: model 'claude-x': ")
        assert stderr.count("\n") == 1
        code, _, stdout = answer(**{k: v for k, v in sent.items() if k == "RETROD_PRICES"})
        assert code == "0"
        assert json.loads(stdout)["summary"]["cost"]["unknown_models"] == [None]  # imaginary is priced now
        code, _, stdout = answer()  # none given: the package alone, whatever the daemon's own setting
        assert json.loads(stdout)["summary"]["cost"]["unknown_models"] == [None, "claude-imaginary-9"]


def test_phases_and_verdicts_carry_their_cost(priced: dict, db_url: str) -> None:
    # Phase 1 holds p1 (opus, at second 1) and p2 (haiku, at 2); phase 2 holds p3 .. p5.
    base = datetime(2026, 3, 1, tzinfo=UTC)
    _log_phases(db_url, A, [(base, base + timedelta(seconds=2.5)), (base + timedelta(seconds=2.5),
                                                                    base + timedelta(seconds=10))])
    report = json_report(priced)
    first, second = report["phases"]
    assert first["cost"] == {"usd": pytest.approx(OPUS_USD + HAIKU_USD, abs=1e-9), "unknown_models": [],
                             "complete": True}
    assert [r["model"] for r in first["tokens_by_model"]] == ["claude-opus-4-6", "claude-haiku-4-5-20251001"]
    assert second["cost"] == {"usd": None, "unknown_models": [None, "claude-imaginary-9"], "complete": False}
    verdict = report["verdicts"]["small_impact"]["cost"]
    assert (verdict["usd"], verdict["complete"]) == (pytest.approx(OPUS_USD + HAIKU_USD, abs=1e-9), False)
    markdown = retrod(priced, "report", A, "--no-save").stdout
    assert "- **Estimated cost:** $0.13 (`claude-opus-4-6` $0.13, `claude-haiku-4-5-20251001` <$0.01)" in markdown
    assert "- **Estimated cost:** not priced (" in markdown


# ---- migration 0009 on a database that already holds rows -------------------------------------

RAW_TABLES = ("files", "requests", "events", "tool_calls", "subagents", "subagent_links", "subagent_meta")


def _columns(conn: psycopg.Connection, table_name: str) -> str:
    names = [r[0] for r in conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = 'retrod' AND table_name = %s"
        " ORDER BY ordinal_position", (table_name,))]
    return ", ".join(f'"{n}"' for n in names)


def _copy_raw_rows(source_url: str, target_url: str) -> None:
    """The rows a version-8 retrod would have written: the raw tables, in the target's columns
    (no model), loaded through its own triggers, which build its rollups."""
    with psycopg.connect(source_url) as src, psycopg.connect(target_url) as dst:
        for name in RAW_TABLES:
            columns = _columns(dst, name)
            # (a subagent timeline's rows, `sub`, came with migration 0022: none before it)
            where = " WHERE NOT sub" if name == "events" and '"sub"' not in columns else ""
            with (src.cursor().copy(f"COPY (SELECT {columns} FROM retrod.{name}{where}) TO STDOUT") as out,
                  dst.cursor().copy(f"COPY retrod.{name} ({columns}) FROM STDIN") as into):
                for data in out:
                    into.write(data)
        dst.execute("SELECT setval('retrod.files_id_seq', (SELECT max(id) FROM retrod.files))")


def test_a_version_8_database_gets_models_by_reading_its_files_again(pg_cluster, projects: Path,
                                                                     tmp_path: Path) -> None:
    from conftest import fresh_database
    from retrod.store.migrate import load, migrate

    # A transcript deleted before the upgrade (a session of one file, its 24 requests its own).
    gone = projects / "-Users-chip-dev-ai-music" / "ba79134d-b6e9-4867-af0c-6941038c9e4b.jsonl"
    gone_session = gone.stem
    old_migrations = older_migrations(tmp_path / "migrations-v8", lambda version: version <= 8)
    v8 = "t_v8_" + os.urandom(6).hex()
    pg_cluster.create_database(v8)
    with fresh_database(pg_cluster) as now_url:
        ingest(now_url, [projects])  # what retrod stores today, models and all
        gone.unlink()
        ingest(now_url, [projects])  # ... and the deleted file marked missing
        with psycopg.connect(pg_cluster.url(v8), autocommit=True) as conn:
            assert migrate(conn, old_migrations) == list(range(1, 9))
        _copy_raw_rows(now_url, pg_cluster.url(v8))
        with psycopg.connect(now_url) as conn:
            want = dict(conn.execute("SELECT key, model FROM retrod.requests").fetchall())
            sizes = {t: conn.execute(f"SELECT count(*) FROM retrod.{t}").fetchone()[0] for t in RAW_TABLES}
            copied = {**sizes, "events": conn.execute("SELECT count(*) FROM retrod.events WHERE NOT sub").fetchone()[0]}
        want_reports = reports(now_url)

    url = pg_cluster.url(v8)
    with psycopg.connect(url, autocommit=True) as conn:
        # In a team, another member's rows: the rebuilt rollup must stay theirs (0008's end).
        conn.execute("UPDATE retrod.requests SET db_role = 'member_b' WHERE session_uuid = %s", (gone_session,))
        assert migrate(conn) == [m.version for m in load() if m.version > 8]
        assert conn.execute("SELECT count(*) FROM retrod.requests WHERE model <> ''").fetchone()[0] == 0
        assert conn.execute("SELECT array_agg(DISTINCT db_role) FROM retrod.request_minutes WHERE session_uuid = %s",
                            (gone_session,)).fetchone()[0] == ["member_b"]
        # Offsets back to 0 for the files on disk; the deleted one keeps its own.
        offsets = dict(conn.execute("SELECT path, \"offset\" FROM retrod.files"
                                    " WHERE kind IN ('main', 'subagent', 'agent_root')").fetchall())
        assert offsets[str(gone)] > 0 and sum(offsets.values()) == offsets[str(gone)]
        assert {t: conn.execute(f"SELECT count(*) FROM retrod.{t}").fetchone()[0] for t in RAW_TABLES} == copied
    rollups_match_raw(url)  # request_minutes rebuilt with the model column

    ingest(url, [projects])
    with psycopg.connect(url) as conn:
        got = dict(conn.execute("SELECT key, model FROM retrod.requests").fetchall())
        sessions = dict(conn.execute("SELECT key, session_uuid FROM retrod.requests").fetchall())
        assert {t: conn.execute(f"SELECT count(*) FROM retrod.{t}").fetchone()[0] for t in RAW_TABLES} == sizes
    assert got.keys() == want.keys()
    # Every request gets its model back, except those only the deleted transcript held.
    lost = {k for k, s in sessions.items() if s == gone_session}
    assert lost and all(got[k] == "" for k in lost)
    assert {k: m for k, m in got.items() if k not in lost} == {k: m for k, m in want.items() if k not in lost}
    rollups_match_raw(url)
    after = reports(url)
    assert after.keys() == want_reports.keys()
    with psycopg.connect(url) as conn:  # (its requests are member_b's now: keys include the member, §3)
        after_b = model.build(conn, gone_session, member="member_b")["summary"]
    assert after[gone_session]["summary"]["tokens"]["total"]["output"] == 0
    for session, report in want_reports.items():  # nothing counted twice, nothing dropped
        tokens = (after_b if session == gone_session else after[session]["summary"])["tokens"]
        assert tokens == report["summary"]["tokens"], session
        assert after[session]["summary"]["wall_s"] == report["summary"]["wall_s"], session
        if session != gone_session:  # the files read again gave every call its signal (0010)
            assert after[session]["summary"]["tool_use"] == report["summary"]["tool_use"], session
    assert after[gone_session]["summary"]["tool_use"]["calls"] == 0  # deleted before 0010: no calls kept
    assert want_reports[gone_session]["summary"]["tool_use"]["calls"] > 0
    (row,) = after_b["tokens_by_model"]  # kept, as unknown
    assert row["model"] is None and row["requests"] == want_reports[gone_session]["summary"]["requests"]
    with psycopg.connect(pg_cluster.url("postgres"), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {v8} WITH (FORCE)")


def test_files_an_older_retrod_read_again_are_read_once_more_keeping_their_rows(db_url: str,
                                                                                projects: Path) -> None:
    """A daemon from before models, still running while a command applies migration 0009, reads
    the rewound files again under its own rules: no models, and fold states without `rules`.
    This retrod reads those files again from their start, rows kept, and ends as one pass."""
    ingest(db_url, [projects])
    want = snapshot(db_url)
    with psycopg.connect(db_url) as conn:
        conn.execute("UPDATE retrod.requests SET model = ''")
        # (Its other files' states lack `rules` too, and nothing is to be read again in them.)
        conn.execute("UPDATE retrod.files SET state = state - 'rules'"
                     " WHERE kind IN ('main', 'subagent', 'agent_root') AND \"offset\" > 0")
        sizes = {t: conn.execute(f"SELECT count(*) FROM retrod.{t}").fetchone()[0] for t in RAW_TABLES}
    ingest(db_url, [projects])
    assert snapshot(db_url) == want
    with psycopg.connect(db_url) as conn:
        assert {t: conn.execute(f"SELECT count(*) FROM retrod.{t}").fetchone()[0] for t in RAW_TABLES} == sizes
    rollups_match_raw(db_url)


def test_a_result_an_older_retrod_read_is_kept_when_the_file_is_read_again(db_url: str, tmp_path: Path) -> None:
    """Found in review: this retrod read a call; an older one (no `rules` in its states) read its
    result; reading the file again from its start, rows kept, must store that result, not skip it."""
    from tool_use_engines import main_transcript_line

    session = "aaaaaaaa-0000-4000-8000-0000000000a1"
    path = tmp_path / "projects" / "proj" / f"{session}.jsonl"
    path.parent.mkdir(parents=True)
    call = main_transcript_line(session, 10, "assistant", {"type": "tool_use", "id": "x1", "name": "Bash",
                                                           "input": {"command": "make"}})
    path.write_text(call)
    ingest(db_url, [tmp_path / "projects"])
    with path.open("a") as f:
        f.write(main_transcript_line(session, 11, "user", {"type": "tool_result", "tool_use_id": "x1",
                                                           "content": "boom", "is_error": True}))
        f.write(main_transcript_line(session, 12, "assistant", {"type": "tool_use", "id": "x2", "name": "Bash",
                                                                "input": {"command": "make"}}))
    size = path.stat().st_size
    with psycopg.connect(db_url) as conn:  # what the older daemon left: the rest read, no `rules`
        conn.execute("UPDATE retrod.files SET \"offset\" = %s, size = %s, state = state - 'rules'", [size, size])
    ingest(db_url, [tmp_path / "projects"])
    with psycopg.connect(db_url) as conn:
        rows = conn.execute("SELECT tool_use_id, has_result, failed, signal FROM retrod.tool_uses"
                            " ORDER BY \"offset\"").fetchall()
    assert rows == [("x1", True, True, "error_retry"), ("x2", False, False, None)]


# ---- parts, fast mode and long-context prices (issue 19) ---------------------------------------

C = "cccccccc-1111-4000-8000-000000000003"


def on(day: str, clock: str = "10:00:00.000") -> str:
    return f"{day}T{clock}Z"


def line(key: str, when: str, use: dict, model_name: str, session: str = C) -> dict:
    return {"type": "assistant", "sessionId": session, "timestamp": when, "requestId": f"req_{key}",
            "message": {"id": key, "role": "assistant", "model": model_name, "content": [], "usage": use}}


def iteration(inp: int, out: int, cr: int, cc: int, model_name: str | None = None) -> dict:
    it = {"input_tokens": inp, "output_tokens": out, "cache_read_input_tokens": cr, "cache_creation_input_tokens": cc,
          "cache_creation": {"ephemeral_5m_input_tokens": cc, "ephemeral_1h_input_tokens": 0}, "type": "message"}
    if model_name is not None:
        it["model"] = model_name
    return it


# r1: Claude Code 2.1.217's refusal fallback, as a real transcript has it (its first snapshot too):
# Fable 5 refused, Opus 4.8 answered; the top level holds the answer only.
FALLBACK = [
    line("r1", on("2026-03-01", "10:00:00.100"), dict(usage(2, 2, 54112, 0), iterations=[
        iteration(2, 2, 32238, 21874, "claude-fable-5")]), "claude-opus-4-8"),
    line("r1", on("2026-03-01", "10:00:00.200"), dict(usage(2, 136, 54112, 0), speed="standard", iterations=[
        iteration(2, 2, 32238, 21874, "claude-fable-5"),
        iteration(2, 136, 54112, 0, "claude-opus-4-8")]), "claude-opus-4-8"),
    # r2: fast mode (Opus 4.8's fast prices: 10, 50, 1, 12.5 per million)
    line("r2", on("2026-03-01", "10:01:00.000"), dict(usage(2458, 168, 0, 12587, five=12587, hour=0), speed="fast",
                                                      iterations=[iteration(2458, 168, 0, 12587)]), "claude-opus-4-8"),
    # r3: 250,000 input tokens on Opus 4.6 before 2026-03-13: the long-context tier for all of it
    line("r3", on("2026-03-01", "10:02:00.000"), usage(10_000, 1000, 240_000, 0), "claude-opus-4-6"),
    # r4: the same on 2026-03-13, when Opus 4.6 lost its tier
    line("r4", on("2026-03-13"), usage(10_000, 1000, 240_000, 0), "claude-opus-4-6"),
    # r5: two parts of 120,000 each: each below the tier, whatever their sum
    line("r5", on("2026-03-01", "10:03:00.000"), dict(usage(0, 500, 120_000, 0), iterations=[
        iteration(0, 500, 120_000, 0), iteration(0, 500, 120_000, 0)]), "claude-opus-4-6"),
]
# By hand, USD per million:
#   fable-5 part of r1:  2×10 + 2×50 + 32,238×1 + 21,874×12.5              = 305,783     → 0.305783
#   opus-4-8 part of r1: 2×5 + 136×25 + 54,112×0.5                         =  30,466     → 0.030466
#   r2 (fast):           2,458×10 + 168×50 + 12,587×12.5                   = 190,317.5   → 0.1903175
#   r3 (tier):           10,000×10 + 1,000×37.5 + 240,000×1                = 377,500     → 0.3775
#   r4 (no tier):        10,000×5 + 1,000×25 + 240,000×0.5                 = 195,000     → 0.195
#   r5 (two parts):      2 × (500×25 + 120,000×0.5)                        = 145,000     → 0.145
# (to the micro-dollar, half to even: 0.2207835 → 0.220784; the total 1.2440665 → 1.244066)
FALLBACK_COST = {"claude-opus-4-6": 0.7175, "claude-opus-4-8": 0.220784, "claude-fable-5": 0.305783}


def test_parts_fast_mode_and_long_context_by_hand(db_url: str, tmp_path: Path) -> None:
    root = tmp_path / "projects"
    write(root / "-p" / f"{C}.jsonl", FALLBACK)
    ingest(db_url, [root])
    report = session_report(db_url, C)
    summary = report["summary"]
    rows = {r["model"]: r for r in summary["tokens_by_model"]}
    assert {m: r["cost_usd"] for m, r in rows.items()} == FALLBACK_COST
    assert {m: (r["requests"], r["fast_requests"]) for m, r in rows.items()} == {
        "claude-opus-4-6": (4, 0), "claude-opus-4-8": (2, 1), "claude-fable-5": (1, 0)}  # parts of each model
    assert (rows["claude-fable-5"]["input"], rows["claude-fable-5"]["cache_create"]) == (2, 21874)
    assert (summary["requests"], summary["split_requests"]) == (5, 2)  # r1 and r5 had two parts
    # The request's tokens are its parts' sums: 2 + 2 + 2,458 + 10,000 + 10,000 input, ...
    assert summary["tokens"]["total"] == {"input": 22_462, "output": 3306, "cache_read": 806_350,
                                          "cache_create": 34_461}
    assert summary["cost"] == {"usd": 1.244066, "unknown_models": [], "complete": True}
    want = reference.compute(root)[C]
    assert by_model(summary["tokens_by_model"]) == want["tokens_by_model"]
    assert summary["cost"] == want["cost"]
    rollups_match_raw(db_url)

    markdown = retrod_markdown(db_url, root, tmp_path)
    assert "2 requests had several parts" in markdown and "Fast mode: `claude-opus-4-8` 1." in markdown


def retrod_markdown(db_url: str, root: Path, tmp_path: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RETROD_")}
    env.update(RETROD_DATABASE_URL=db_url, RETROD_PROJECTS_DIR=str(root), RETROD_HOST_ID=HOST,
               RETROD_DATA_DIR=str(tmp_path / "data"), HOME=str(tmp_path / "home"))
    done = retrod(env, "report", C, "--no-save")
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_winning_record_brings_its_parts_in_any_order_and_chunking(db_url: str, tmp_path: Path) -> None:
    root = tmp_path / "projects"
    path = root / "-p" / f"{C}.jsonl"
    want = None
    for lines in (FALLBACK, FALLBACK[::-1], FALLBACK[1::2] + FALLBACK[::2]):
        with psycopg.connect(db_url) as conn:  # start over: the same records in another order
            conn.execute("TRUNCATE retrod.files, retrod.requests CASCADE")
        write(path, [])
        for one in lines:  # one line per ingest: each record meets the stored one in the upsert
            with path.open("a") as f:
                f.write(json.dumps(one) + "\n")
            ingest(db_url, [root])
        got = session_report(db_url, C)["summary"]
        assert {r["model"]: r["cost_usd"] for r in got["tokens_by_model"]} == FALLBACK_COST
        want = want or snapshot(db_url)
        assert snapshot(db_url)["request_minutes"] == want["request_minutes"]
        rollups_match_raw(db_url)


def test_changed_price_tiers_sum_the_rollup_again(db_url: str, tmp_path: Path) -> None:
    """A price-data upgrade that moves a tier threshold: the stored tiers were summed by the old
    thresholds; the next report stores the new ones, sums the rollup again, and prices right."""
    root = tmp_path / "projects"
    write(root / "-p" / f"{C}.jsonl", FALLBACK)
    ingest(db_url, [root])
    with psycopg.connect(db_url) as conn:
        # As an older price table, stored by an older retrod, would have left them:
        conn.execute("UPDATE retrod.price_tiers SET thresholds = '{300000}', source_version = '0.1.0'")
        conn.execute("SELECT retrod.rebuild_request_minutes()")
        conn.commit()
        assert conn.execute("SELECT DISTINCT tier_floor FROM retrod.request_minutes").fetchall() == [(0,)]
    rollups_match_raw(db_url)
    summary = session_report(db_url, C)["summary"]  # the report puts the package's thresholds back
    assert {r["model"]: r["cost_usd"] for r in summary["tokens_by_model"]} == FALLBACK_COST
    with psycopg.connect(db_url) as conn:
        tier_rows = conn.execute("SELECT tier_floor, sum(parts) FROM retrod.request_minutes GROUP BY 1 ORDER BY 1")
        # r3 and r4 above 200,000; r5's two parts above 100,000 (a tier of another model's)
        assert tier_rows.fetchall() == [(0, 3), (100_000, 2), (200_000, 2)]
        assert not pricing.store_tiers(conn)  # nothing to do now
        # A newer price data's thresholds are not undone by an older retrod's command.
        assert tiers.ensure(conn, [300_000], "99.0") and not pricing.store_tiers(conn)
        conn.commit()
    rollups_match_raw(db_url)


def test_a_commands_settings_go_with_it_to_the_daemon(priced: dict, db_url: str, monkeypatch) -> None:
    """Issue 19: a setting that changes figures is the command's, whoever answers; unset is the
    default, never the daemon's own setting (the daemon here runs with a 60 s away threshold)."""
    for name in [k for k in os.environ if k.startswith("RETROD_")]:
        monkeypatch.delenv(name)
    for name, value in priced.items():
        if name.startswith("RETROD_"):
            monkeypatch.setenv(name, value)
    with ConnectionPool(db_url, min_size=1, max_size=2, open=True) as pool:
        server = ReportServer(pool, Settings(away_after_s=60))

        def away_after(**extra: str) -> float:
            code, stderr, stdout = server.answer({"session": A, "format": "json", "pid": str(os.getpid()),
                                                  "database_url": db_url, **extra})
            assert code == "0", stderr
            return json.loads(stdout)["summary"]["away_after_s"]

        assert away_after() == 1800.0  # the default, not the daemon's 60
        assert away_after(RETROD_AWAY_AFTER_S="90") == 90.0  # the command's own


# ---- accounting.md §2.7: a split that does not add up is all 5m -----------------------------------------

C = "cccccccc-1111-4000-8000-000000000003"
D = "dddddddd-1111-4000-8000-000000000004"
OPUS46 = "claude-opus-4-6"


def _split_session(session: str, day: int, malformed: tuple[int, int], extra_output: int = 0) -> list[dict]:
    """Requests of one price group (Opus 4.6 on 2026-03-0`day`+), where `malformed` is the (5m, 1h)
    split given with 1,000 cache writes, once as a request of one part and once as a part of a
    request split in two; beside them well-formed 1h writes, whose 1h rate stands. They fall in a
    phase's edge, its whole minutes and its whole hours (see the windows below)."""
    base = (day - 1) * 86400
    five, hour = malformed
    part_a = usage(5, 7, 0, 3000, 0, 3000)
    part_b = usage(5, 9, 0, 1000, five, hour)
    return [
        record(f"{session}-r1", base + 10, usage(10, 100 + extra_output, 0, 1000, five, hour), OPUS46,
               session=session),
        record(f"{session}-r2", base + 20, usage(10, 50, 0, 5000, 0, 5000), OPUS46, session=session),
        record(f"{session}-r3", base + 30, {**usage(10, 16, 0, 4000), "iterations": [part_a, part_b]}, OPUS46,
               session=session),
        record(f"{session}-r4", base + 130, usage(3, 4, 0, 1000, five, hour), OPUS46, session=session),
        record(f"{session}-r5", base + 3700, usage(3, 4, 0, 1000, five, hour), OPUS46, session=session),
    ]


def test_a_split_that_does_not_add_up_is_priced_all_5m_on_every_surface(db_url: str, tmp_path: Path) -> None:
    """accounting.md §2.7: "When a part's 5m and 1h writes do not add up to its cache writes, all of its
    cache writes count as 5m": 1,000 writes given as 5m 200 and 1h 900 cost 1,000 at the 5m rate,
    per part, whatever else its price group holds; the split is shown as given. A is priced as the
    reference prices it, and exactly as C, the same usage with those writes given as 5m 1,000: by
    the report, a phase (its edges, minutes and hours), the session lists (`retrod sessions`'
    and the web UI's, whose sort by cost puts D — C with one more output token — before A),
    trends, the web UI's timeline and the status line's today."""
    root = tmp_path / "projects"
    write(root / "-p" / f"{A}.jsonl", _split_session(A, 1, (200, 900)))
    write(root / "-p" / f"{C}.jsonl", _split_session(C, 2, (1000, 0)))
    write(root / "-p" / f"{D}.jsonl", _split_session(D, 3, (1000, 0), extra_output=1))
    ingest(db_url, [root])
    rollups_match_raw(db_url)
    want = reference.compute(root)
    got = reports(db_url)
    summary = got[A]["summary"]
    assert by_model(summary["tokens_by_model"]) == want[A]["tokens_by_model"]
    opus = by_model(summary["tokens_by_model"])[OPUS46]  # the split shown as given
    assert (opus["cache_create"], opus["cache_create_5m"], opus["cache_create_1h"]) == (12000, 4 * 200, 8000 + 4 * 900)
    assert summary["cost"] == want[A]["cost"] == got[C]["summary"]["cost"]
    # by hand, per million at $5 input, $25 output, $6.25 5m and $10 1h writes: r1 50 + 2,500 +
    # 6,250; r2 50 + 1,250 + 50,000; r3 25 + 175 + 30,000 and 25 + 225 + 6,250; r4, r5 15 + 100 +
    # 6,250 (the four malformed parts' 1,000 writes at 5m: at 900 1h and 100 5m, $0.0135 more)
    cost = summary["cost"]["usd"]
    assert cost == 0.10953
    assert got[D]["summary"]["cost"]["usd"] == 0.109555  # (its one output token more)

    start = datetime(2026, 3, 1, tzinfo=UTC)
    windows = [(start + timedelta(seconds=5), start + timedelta(seconds=25)),  # an edge: raw parts
               (start + timedelta(seconds=25), start + timedelta(hours=3, seconds=30))]  # minutes, hours
    _log_phases(db_url, A, windows)
    with psycopg.connect(db_url) as conn:
        member = conn.execute("SELECT current_user").fetchone()[0]
        phases = sorted(model.build(conn, A)["phases"], key=lambda p: int(p["phase"]))
        expected = reference.compute_phase_models(root, A, windows, with_cost=True)
        assert [by_model(p["tokens_by_model"]) for p in phases] == [e["tokens_by_model"] for e in expected]
        assert [p["cost"] for p in phases] == [e["cost"] for e in expected]

        listed = model.session_costs(conn, [(A, member), (C, member)], pricing.DEFAULT)
        assert listed[(A, member)][1] == listed[(C, member)][1] == summary["cost"]
        page = data.sessions(conn, data.SessionQuery(sort="cost", order="desc"))  # ui.sql's cost, in doubles
        assert page["sessions"][0]["uuid"] == D  # (A at 900 1h writes a part would cost more)
        assert {row["uuid"]: row["cost"] for row in page["sessions"]}[A] == summary["cost"]

        days = {p["period"]: p for p in trends.trends(conn, by="day", tz="UTC")["periods"]}
        assert days["2026-03-01"]["cost"] == summary["cost"]
        assert timeline.series(conn, A)["cost_usd"] == timeline.series(conn, C)["cost_usd"]
        today = statusline.figures(conn, None, (start, start + timedelta(days=1)))["today"]
        assert today["cost_usd"] == cost


def test_rows_stored_before_migration_0036_are_priced_by_the_rule(pg_cluster, tmp_path: Path) -> None:
    """A database whose rollups were summed before 0036 (no priced 1h writes): the migration works
    the writes priced at 1h out of the raw parts (a split that does not add up gives none), in the
    minutes, the hours and the sessions, and the report prices as the reference does."""
    from conftest import fresh_database
    from retrod.store.migrate import load, migrate

    root = tmp_path / "projects"
    write(root / "-p" / f"{A}.jsonl", _split_session(A, 1, (200, 900)))
    write(root / "-p" / f"{C}.jsonl", _split_session(C, 2, (1000, 0)))
    before = older_migrations(tmp_path / "before", lambda version: version < 36)
    with fresh_database(pg_cluster) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DROP SCHEMA retrod CASCADE")
            conn.execute("DROP TABLE cc_session_phases, cc_sessions")
            migrate(conn, before)
            # today's ingest writes a holder line's link and folder, and a file's folder, as 0036 adds them
            conn.execute("ALTER TABLE retrod.line_holders ADD COLUMN link_agent TEXT, ADD COLUMN link_tool_use TEXT,"
                         " ADD COLUMN cwd_changed BOOLEAN NOT NULL DEFAULT false, ADD COLUMN cwd TEXT")
            conn.execute("ALTER TABLE retrod.files ADD COLUMN cwd TEXT")
        ingest(url, [root])
        with psycopg.connect(url, autocommit=True) as conn:
            assert migrate(conn) == [m.version for m in load() if m.version >= 36]
            for table in ("request_minutes", "request_hours", "session_requests"):  # A's and C's 1h parts
                assert conn.execute(f"SELECT sum(priced_1h_tokens) FROM retrod.{table}").fetchone()[0] == 2 * 8000
        rollups_match_raw(url)
        assert reports(url)[A]["summary"]["cost"] == reference.compute(root)[A]["cost"]
