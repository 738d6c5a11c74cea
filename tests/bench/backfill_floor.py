"""What any backfill that keeps retrod's rows must spend at least, against ccusage's whole scan
(issue 13's target: within 1.5×, then 1×, of it on the same tree).

    python tests/bench/backfill_floor.py                  # a 100 MB tree, three rounds
    python tests/bench/backfill_floor.py --mb 1000 --rounds 1
    python tests/bench/backfill_floor.py --tree ~/.claude/projects --rounds 1   # a real history

Per round, on one generated tree (corpus.write_tree):
- decode: reading every line and decoding it into the parser's typed structs (msgspec; the
  fields retrod does not read are skipped, not built), one thread, nothing made of them: the
  least retrod's parser does;
- store: PostgreSQL's CPU (every `postgres` process: the write-ahead log's writer and the
  checkpointer too) to `COPY` the rows retrod keeps for the tree (events, requests, tool uses,
  tool calls, subagents and their links, the lines holding a uuid (accounting.md §2.1) and the
  compaction boundaries (§2.8), as its own fold makes them) into the migrated tables,
  with their indexes, without a trigger, a rollup, a judgement or a foreign-key check: the least
  the database does for them, whatever statements bring them. Approximations, both ways: every
  tool use is stored as counted (retrod counts an id seen in two files once: a few more rows in
  the partial indexes here), and results without their call in the same chunk and project-level
  agent files (a few) are left out;
- ccusage: `ccusage claude session --json --offline`, the whole process.

Both cores can hold the work, so the budget of a backfill within N× ccusage is 2 × N × its
wall time in CPU seconds; decode + store is the least a backfill spends of it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import msgspec
import psycopg
from psycopg_pool import ConnectionPool

sys.path.insert(0, str(Path(__file__).resolve().parent))

from backfill import decode_lines
from corpus import write_tree
from harness import database, postgres_cpu_s
from peers import find_ccusage
from retrod.store.store import Store, merged_requests
from retrod.transcript.discovery import walk
from retrod.transcript.fold import FoldResult, FoldState, Request, fold
from retrod.transcript.parser import _Line, parse_line
from retrod.transcript.tailer import read_chunk

CORES = 2
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
TABLES = {  # table: its columns as COPY gets them
    "events": '(file_id, "offset", session_uuid, ts, prev_ts, kind, gap_us, tool_result_bytes, line_uuid, gap_class,'
              ' compaction, sub, counted)',
    "requests": "(key, session_uuid, agent, ts, attr_sidechain, attr_foreign, attr_ts, usage_main, input_tokens,"
                " output_tokens, cache_read_tokens, cache_create_tokens, cache_create_5m_tokens,"
                " cache_create_1h_tokens, has_tool_use, model)",
    "tool_uses": '(file_id, tool_use_id, session_uuid, agent, file_path, "offset", block, name, input_hash, path,'
                 " detail, ts, counted, has_result, failed, sibling, result_bytes, result_ts)",
    "tool_calls": "(file_id, tool_use_id, session_uuid, name, ts, description, subagent_type)",
    "subagents": "(file_id, session_uuid, agent_id, first_ts, last_ts)",
    "subagent_links": "(file_id, session_uuid, agent_id, tool_use_id)",
    # (accounting.md §2.1's unmarked candidate lines with a uuid, and §2.8's compaction boundaries)
    "line_holders": '(file_id, "offset", session_uuid, line_uuid, bg, key, agent, sidechain, ts)',
    "cache_boundaries": '(file_id, "offset", session_uuid, agent, ts)',
}


def _ts(us: int | None) -> datetime | None:
    return None if us is None else _EPOCH + timedelta(microseconds=us)


def folded(tree: Path, file_ids: dict[str, int]) -> dict[str, list[tuple]]:
    """The rows retrod's fold makes of every transcript under `tree`, as COPY takes them."""
    rows: dict[str, list[tuple]] = {table: [] for table in TABLES}
    requests: list[Request] = []  # merged at the end, as one batch's are (Store._write_rows)
    for ref in walk(tree):
        if not ref.is_transcript or ref.session_uuid is None:
            continue  # (project-level agent files, named by their content, are left out: a few)
        file_id, session, path = file_ids[str(ref.path)], ref.session_uuid, str(ref.path)
        result, offset, state = FoldResult(FoldState()), 0, FoldState()
        fd = os.open(ref.path, os.O_RDONLY)
        try:
            while (chunk := read_chunk(fd, offset, 4 << 20)).lines:
                result = fold(ref.source("floor", session), state, [(o, parse_line(raw)) for o, raw in chunk.lines])
                offset, state = chunk.end, result.state
                _add_rows(rows, requests, result, file_id, session, path)
        finally:
            os.close(fd)
    rows["requests"] = [(r.key, r.session_uuid, r.agent, _ts(r.ts_us), r.attr_sidechain, r.attr_foreign,
                         _ts(r.attr_ts_us), r.usage_main, r.usage.input, r.usage.output, r.usage.cache_read,
                         r.usage.cache_create, r.usage.cache_create_5m, r.usage.cache_create_1h, r.has_tool_use,
                         r.model) for r in merged_requests(requests).values()]
    return rows


def _add_rows(rows: dict[str, list[tuple]], requests: list[Request], result: FoldResult, file_id: int,
              session: str, path: str) -> None:
    requests += result.requests.values()
    rows["events"] += [(file_id, e.offset, session, _ts(e.ts_us), _ts(e.prev_us), e.kind, e.gap_us,
                        e.tool_result_bytes, e.line_uuid, e.gap_class, e.compaction, e.sub, not e.sub)
                       for e in result.events]
    rows["line_holders"] += [(file_id, h.offset, session, h.uuid, h.bg, h.key, h.agent, h.sidechain, _ts(h.ts_us))
                             for h in result.holders]
    rows["cache_boundaries"] += [(file_id, b.offset, session, b.agent, _ts(b.ts_us)) for b in result.boundaries]
    for call in result.calls.values():
        got = result.results.get(call.id)
        rows["tool_uses"].append((
            file_id, call.id, session, call.agent, path, call.offset, call.block, call.name, call.input_hash,
            call.path, call.detail, _ts(call.ts_us), True, got is not None, got is not None and got.failed,
            got is not None and got.sibling, got.bytes if got else None, _ts(got.ts_us) if got else None))
    rows["tool_calls"] += [(file_id, c.id, session, c.name, _ts(c.ts_us), c.description, c.subagent_type)
                           for c in result.tool_calls.values()]
    rows["subagents"] += [(file_id, session, agent, _ts(s.min_us), _ts(s.max_us))
                          for agent, s in result.subagents.items()]
    rows["subagent_links"] += [(file_id, session, agent, tool_use_id) for agent, tool_use_id in result.links]


def _dedup(rows: dict[str, list[tuple]]) -> None:
    """One row per key, as the upserts leave them (a file's later chunk may repeat a subagent)."""
    keys = {"tool_uses": (2, 1, 0), "tool_calls": (0, 1), "subagents": (0, 2), "subagent_links": (0, 2, 3),
            "cache_boundaries": (0, 1)}
    for table, key in keys.items():
        rows[table] = list({tuple(row[i] for i in key): row for row in rows[table]}.values())


def store_cpu_s(url: str, tree: Path, cluster: Path) -> tuple[float, int]:
    """(PostgreSQL CPU seconds, rows) to COPY the tree's rows into the indexed tables; the CPU of
    the cluster made in `cluster` only (a shared machine runs others)."""
    with ConnectionPool(url, min_size=1, max_size=1, open=True) as pool:
        refs = [ref for ref in walk(tree) if ref.is_transcript]
        file_ids = {path: row.id for path, row in Store(pool, "floor").files(refs).items()}
    rows = folded(tree, file_ids)
    _dedup(rows)
    with psycopg.connect(url) as conn:
        for table in TABLES:
            conn.execute(f"ALTER TABLE retrod.{table} DISABLE TRIGGER ALL")  # foreign keys' checks too
        conn.commit()
        before = postgres_cpu_s(cluster)
        with conn.transaction():
            for table, columns in TABLES.items():
                with conn.cursor().copy(f"COPY retrod.{table} {columns} FROM STDIN") as copy:
                    for row in rows[table]:
                        copy.write_row(row)
        return postgres_cpu_s(cluster) - before, sum(len(r) for r in rows.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-ccusage", action="store_true")
    parser.add_argument("--tree", type=Path, help="an existing projects folder to use instead (--mb is ignored)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="retrod-floor-", dir="/tmp") as folder:
        scratch = Path(folder)
        os.chmod(scratch, 0o711)  # as root, the cluster runs as postgres and must reach its folder
        claude_dir = scratch / "claude"
        if args.tree:
            claude_dir.mkdir()
            (claude_dir / "projects").symlink_to(args.tree.resolve())
            size = sum(p.stat().st_size for p in args.tree.rglob("*") if p.is_file())
        else:
            size = write_tree(claude_dir / "projects", int(args.mb * 1e6))
        ccusage, why = (None, "not asked for") if args.no_ccusage else find_ccusage(scratch)
        runs: dict[str, list[float]] = {"decode": [], "store": [], "ccusage": []}
        stored = 0
        for _ in range(args.rounds):
            runs["decode"].append(decode_lines(claude_dir / "projects", msgspec.json.Decoder(_Line).decode,
                                               time.process_time)[0])  # CPU, as the database's
            with database(scratch, "floor") as url:
                cpu, stored = store_cpu_s(url, claude_dir / "projects", scratch / "floor-pg")
                runs["store"].append(cpu)
            shutil.rmtree(scratch / "floor-pg")
            if ccusage is not None:
                runs["ccusage"].append(ccusage.sessions(claude_dir).seconds)
    median = {name: statistics.median(values) for name, values in runs.items() if values}
    per_gb = 1e9 / size  # of the tree, every file counted (as corpus.write_tree counts it)
    print(f"{size / 1e6:.0f} MB tree, {stored:,} rows stored, median of {args.rounds}; ccusage: {why}")
    print("| what | seconds | per GB |")
    print("|---|---:|---:|")
    print(f"| decode (CPU, one thread) | {median['decode']:.2f} s | {median['decode'] * per_gb:.1f} s |")
    print(f"| store (PostgreSQL CPU) | {median['store']:.2f} s | {median['store'] * per_gb:.1f} s |")
    least = median["decode"] + median["store"]
    print(f"| decode + store, CPU | {least:.2f} s | {least * per_gb:.1f} s |")
    if "ccusage" in median:
        wall = median["ccusage"]
        print(f"| ccusage, whole process | {wall:.2f} s | {wall * per_gb:.1f} s |")
        for times in (1.5, 1.0):
            budget = CORES * times * wall
            over = f" (decode + store {least / budget:.1f}× over)" if least > budget else ""
            print(f"| CPU budget within {times:g}× ccusage on {CORES} cores | {budget:.2f} s"
                  f" | {budget * per_gb:.1f} s{over} |")


if __name__ == "__main__":
    main()
