"""Tokens by model and their estimated cost (issue 11). A request's model is the `message.model`
of its usage-winning record; the cost is priced when a report is read, from a dated table
shipped in the package (prices.json) or a RETROD_PRICES file, and never guessed.

Expected figures come from the independent reference (tests/reference.py) or are worked out by
hand in the comments; prices are read from the table here, never from the implementation."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest
from psycopg_pool import ConnectionPool

import reference
from helpers import HOST, ingest, reports, rollups_match_raw, snapshot
from retrod.report import client, model
from retrod.report.server import ReportServer
from retrod.settings import Settings

SPOTTER = "258c7280-ae70-4798-800f-63464d01a85d"
PRICES_JSON = Path(__file__).resolve().parents[1] / "daemon" / "retrod" / "report" / "prices.json"
FIGURES = ("requests", "input", "output", "cache_read", "cache_create", "cache_create_5m", "cache_create_1h")
# Every model the fixture transcripts name (tests/fixtures/SOURCES.md): the table prices them all.
FIXTURE_MODELS = {"claude-opus-4-6", "claude-sonnet-4-20250514", "claude-sonnet-4-5-20250929",
                  "claude-opus-4-5-20251101", "claude-opus-4-7", "claude-haiku-4-5-20251001",
                  "claude-opus-4-20250514", "claude-opus-4-1-20250805", "claude-sonnet-5"}


def by_model(rows: list[dict]) -> dict:
    return {row["model"]: {f: row[f] for f in FIGURES} for row in rows}


def table() -> dict:
    return json.loads(PRICES_JSON.read_text(), parse_float=Decimal)


def dollars(figures: dict, rates: dict) -> Decimal:
    """README: cache writes in the 1-hour split at the 1-hour price, every other cache write
    (the 5-minute ones and those given without a split) at the 5-minute price."""
    hour = min(figures["cache_create_1h"], figures["cache_create"])
    return (figures["input"] * Decimal(rates["input"]) + figures["output"] * Decimal(rates["output"])
            + figures["cache_read"] * Decimal(rates["cache_read"]) + hour * Decimal(rates["cache_create_1h"])
            + (figures["cache_create"] - hour) * Decimal(rates["cache_create_5m"])) / 1_000_000


def expected_cost(models: dict, rates: dict) -> tuple[Decimal | None, list]:
    """(USD of what can be priced, or None when nothing can; models with tokens and no price)."""
    total, unknown, priced = Decimal(0), [], False
    for name, figures in models.items():
        if not any(figures[f] for f in FIGURES[1:]):
            continue  # no tokens: nothing to pay, priced or not
        if name in rates:
            total, priced = total + dollars(figures, rates[name]), True
        else:
            unknown.append(name)
    return (total if priced or not unknown else None), unknown


# ---- the fixture corpus against the reference -------------------------------------------------


def test_the_shipped_table_prices_every_fixture_model_and_only_with_all_five_rates() -> None:
    shipped = table()
    assert datetime.strptime(shipped["date"], "%Y-%m-%d") and shipped["source"].startswith("Anthropic")
    assert set(shipped["models"]) >= FIXTURE_MODELS
    for name, rates in shipped["models"].items():
        assert set(rates) == {"input", "output", "cache_read", "cache_create_5m", "cache_create_1h"}, name
        # Anthropic's multipliers on the input price: 0.1× cache read, 1.25× / 2× cache writes.
        base = Decimal(rates["input"])
        assert (rates["cache_read"], rates["cache_create_5m"], rates["cache_create_1h"]) == (
            base / 10, base * Decimal("1.25"), base * 2), name


def test_every_fixture_session_splits_its_tokens_by_model_as_the_reference(db_url: str, projects: Path) -> None:
    ingest(db_url, [projects])
    got, want = reports(db_url), reference.compute(projects)
    rates = table()["models"]
    seen: set = set()
    for session, expected in want.items():
        summary = got[session]["summary"]
        rows = summary["tokens_by_model"]
        assert by_model(rows) == expected["tokens_by_model"], session
        assert rows == sorted(rows, key=lambda r: (-r["output"], r["model"] or "")), session
        usd, unknown = expected_cost(expected["tokens_by_model"], rates)
        assert summary["cost"]["unknown_models"] == unknown, session
        assert summary["cost"]["complete"] == (not unknown), session
        assert summary["cost"]["usd"] == (None if usd is None else pytest.approx(float(usd), abs=1e-6)), session
        seen |= set(expected["tokens_by_model"])
    assert FIXTURE_MODELS | {"<synthetic>"} <= seen  # the corpus exercises every model


def _log_phases(db_url: str, session: str, windows: list[tuple[datetime, datetime]]) -> None:
    with psycopg.connect(db_url) as conn:
        conn.execute("INSERT INTO cc_sessions (session_uuid, project_slug, started_at) VALUES (%s, 'p', %s)",
                     (session, windows[0][0]))
        for i, (start, end) in enumerate(windows):
            conn.execute("INSERT INTO cc_session_phases (session_id, task, phase, started_at, ended_at, verdict)"
                         " SELECT id, 't', %s, %s, %s, 'small_impact' FROM cc_sessions WHERE session_uuid = %s",
                         (str(i), start, end, session))


def test_phase_windows_split_by_model_as_the_reference(db_url: str, projects: Path) -> None:
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
    expected = reference.compute_phase_models(projects, session, windows)
    assert [by_model(p["tokens_by_model"]) for p in got] == expected
    assert sum(len(e) for e in expected) >= 4  # several models, spread over the windows
    for phase, models in zip(got, expected, strict=True):
        usd, unknown = expected_cost(models, table()["models"])
        assert phase["cost"]["unknown_models"] == unknown
        assert phase["cost"]["usd"] == (None if usd is None else pytest.approx(float(usd), abs=1e-6))


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
        record("m2", 3, usage(1, 4), "claude-opus-4-7"),  # "...-opus-..." < "...-sonnet-...": this one
        record("m3", 4, usage(2, 3)),  # names no model: unknown
        record("m4", 5, usage(), "<synthetic>"),  # Claude Code's own entry, zero tokens
    ]
    want = {
        "claude-opus-4-6": {"requests": 1, "input": 10, "output": 50},
        "claude-opus-4-7": {"requests": 1, "input": 1, "output": 4},
        None: {"requests": 1, "input": 2, "output": 3},
        "<synthetic>": {"requests": 1, "input": 0, "output": 0},
    }
    root = tmp_path / "projects"
    orders = [snapshots, snapshots[::-1], snapshots[2::2] + snapshots[1::2] + snapshots[:1]]
    for n, lines in enumerate(orders):
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
        assert list(got) == ["claude-opus-4-6", "claude-opus-4-7", None, "<synthetic>"]  # by output
        rollups_match_raw(db_url)
    assert reference.compute(root)[A]["tokens_by_model"].keys() == want.keys()


def test_a_copy_in_another_file_ties_with_the_subagents_own_record(db_url: str, tmp_path: Path) -> None:
    root = tmp_path / "projects"
    # An agent_progress copy names no model; the subagent file's record of the same request (both
    # sidechain records, the same usage) does: the request is that model's.
    write(root / "-p" / f"{A}.jsonl", [
        {"type": "progress", "sessionId": A, "timestamp": at(1), "data": {
            "type": "agent_progress", "agentId": "s1",
            "message": {"type": "assistant", "timestamp": at(1), "message": {"id": "k", "usage": usage(7, 8)}}}}])
    ingest(db_url, [root])
    assert by_model(session_report(db_url)["summary"]["tokens_by_model"])[None]["output"] == 8
    write(root / "-p" / A / "subagents" / "agent-s1.jsonl",
          [record("k", 1, usage(7, 8), "claude-haiku-4-5-20251001", isSidechain=True)])
    ingest(db_url, [root])
    (row,) = session_report(db_url)["summary"]["tokens_by_model"]
    assert (row["model"], row["requests"], row["output"]) == ("claude-haiku-4-5-20251001", 1, 8)


# Hand-priced session: the shipped table's rates (USD per million), written out here.
#   claude-opus-4-6            input 5, output 25, cache read 0.50, 5m write 6.25, 1h write 10
#   claude-haiku-4-5-20251001  input 1, output 5,  cache read 0.10, 5m write 1.25, 1h write 2
PRICED = [
    # opus: 1,000 in, 2,000 out, 100,000 cache read, 3,000 written (1,000 for 5 minutes, 2,000 for an hour)
    record("p1", 1, usage(1000, 2000, 100_000, 3000, five=1000, hour=2000), "claude-opus-4-6"),
    # haiku: 500 in, 100 out, 400 written with no split: at the 5-minute price
    record("p2", 2, usage(500, 100, 0, 400), "claude-haiku-4-5-20251001"),
    record("p3", 3, usage(100, 1000), "claude-imaginary-9"),  # not in the table
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


def test_cost_by_hand_with_a_model_the_table_lacks(priced: dict) -> None:
    report = json_report(priced)
    rows = {r["model"]: r for r in report["summary"]["tokens_by_model"]}
    assert rows["claude-opus-4-6"]["cost_usd"] == OPUS_USD
    assert rows["claude-haiku-4-5-20251001"]["cost_usd"] == HAIKU_USD
    assert rows["claude-imaginary-9"]["cost_usd"] is None  # never guessed
    assert rows[None]["cost_usd"] is None and rows[None]["requests"] == 1
    assert rows["<synthetic>"]["cost_usd"] == 0
    assert report["summary"]["cost"] == {
        "usd": pytest.approx(OPUS_USD + HAIKU_USD, abs=1e-9), "prices_date": table()["date"],
        "unknown_models": ["claude-imaginary-9", None],  # by output: 1,000 before 20
        "complete": False}

    markdown = retrod(priced, "report", A, "--no-save").stdout
    section = markdown[markdown.index("## Tokens by Model"):]
    assert markdown.index("| Cache create |") < markdown.index("## Tokens by Model")  # after the token table
    assert "| `claude-opus-4-6` | 1 | 2,000 | 1,000 | 100,000 | 3,000 | 2,000 | $0.13 |" in section
    assert "| `claude-imaginary-9` | 1 | 1,000 | 100 | 0 | 0 | 0 | not priced |" in section
    assert "| unknown | 1 | 20 | 30 | 0 | 0 | 0 | not priced |" in section
    assert "| `<synthetic>` | 1 | 0 | 0 | 0 | 0 | 0 | $0.00 |" in section
    assert "| **Total** | 5 | 3,120 | 1,630 | 100,000 | 3,400 | 2,000 | **≥ $0.13** |" in section
    assert f"Estimated at list prices of {table()['date']}" in section and "not a bill" in section


def test_a_prices_file_overrides_and_extends_the_table(priced: dict, tmp_path: Path) -> None:
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
    assert rows["claude-haiku-4-5-20251001"]["cost_usd"] == HAIKU_USD  # the shipped price still applies
    assert report["summary"]["cost"] == {"usd": pytest.approx(0.14125 + 0.0082 + HAIKU_USD, abs=1e-9),
                                         "prices_date": "2027-01-01", "unknown_models": [None],
                                         "complete": False}
    assert report["prices"]["override"] == str(override)


RATES = {"input": 1, "output": 2, "cache_read": 0.1, "cache_create_5m": 1.25, "cache_create_1h": 2}
BAD_PRICES = [
    ("{not json", "not JSON"),
    ('{"models": {"claude-x": {"input": 1, "output": 2, "cache_read": 0.1, "cache_create_5m": 1.25}}}',
     "no 'cache_create_1h' price"),
    (json.dumps({"models": {"claude-x": dict(RATES, input=-1)}}), "input must be a number from 0 to 1,000,000"),
    (json.dumps({"models": {"claude-x": dict(RATES, input=True)}}), "input must be a number from 0 to 1,000,000"),
    # found in review: a typo this large passed, then failed the rounding of every report
    (('{"models": {"claude-x": {"input": 1e30, "output": 2, "cache_read": 0.1, "cache_create_5m": 1.25,'
     ' "cache_create_1h": 2}}}'), "input must be a number from 0 to 1,000,000"),
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
        code, _, stdout = answer()  # none given: the shipped table, whatever the daemon's own setting
        assert json.loads(stdout)["summary"]["cost"]["unknown_models"] == ["claude-imaginary-9", None]


def test_phases_and_verdicts_carry_their_cost(priced: dict, db_url: str) -> None:
    # Phase 1 holds p1 (opus, at second 1) and p2 (haiku, at 2); phase 2 holds p3 .. p5.
    base = datetime(2026, 3, 1, tzinfo=UTC)
    _log_phases(db_url, A, [(base, base + timedelta(seconds=2.5)), (base + timedelta(seconds=2.5),
                                                                    base + timedelta(seconds=10))])
    report = json_report(priced)
    first, second = report["phases"]
    assert first["cost"] == {"usd": pytest.approx(OPUS_USD + HAIKU_USD, abs=1e-9), "prices_date": table()["date"],
                             "unknown_models": [], "complete": True}
    assert [r["model"] for r in first["tokens_by_model"]] == ["claude-opus-4-6", "claude-haiku-4-5-20251001"]
    assert second["cost"] == {"usd": None, "prices_date": table()["date"],
                              "unknown_models": ["claude-imaginary-9", None], "complete": False}
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
            with (src.cursor().copy(f"COPY (SELECT {columns} FROM retrod.{name}) TO STDOUT") as out,
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
    old_migrations = tmp_path / "migrations-v8"
    old_migrations.mkdir()
    for m in load():
        if m.version <= 8:
            (old_migrations / f"{m.version:04d}_{m.name}.sql").write_text(m.sql)
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
        assert {t: conn.execute(f"SELECT count(*) FROM retrod.{t}").fetchone()[0] for t in RAW_TABLES} == sizes
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
    for session, report in want_reports.items():  # nothing counted twice, nothing dropped
        assert after[session]["summary"]["tokens"] == report["summary"]["tokens"], session
        assert after[session]["summary"]["wall_s"] == report["summary"]["wall_s"], session
        if session != gone_session:  # the files read again gave every call its signal (0010)
            assert after[session]["summary"]["tool_use"] == report["summary"]["tool_use"], session
    assert after[gone_session]["summary"]["tool_use"]["calls"] == 0  # deleted before 0010: no calls kept
    assert want_reports[gone_session]["summary"]["tool_use"]["calls"] > 0
    (row,) = after[gone_session]["summary"]["tokens_by_model"]  # kept, as unknown
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
