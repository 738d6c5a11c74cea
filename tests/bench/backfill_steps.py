"""The README's step table for the bulk path (issue 13): one backfill of a generated tree,
in-process, on each path in turn, with the CPU seconds of this process and of PostgreSQL's
backends beside the wall time.

    python tests/bench/backfill_steps.py                       # 100 MB, three rounds
    python tests/bench/backfill_steps.py --mb 10 --rounds 1    # seconds
    python tests/bench/backfill_steps.py --configs incremental,bulk
    python tests/bench/backfill_steps.py --mb 1000 --configs bulk --rounds 1 --states
    python tests/bench/backfill_steps.py --mb 1000 --configs bulk-no-cache-walks,bulk --rounds 4

Configurations, each run once per round, in turn, so that a noisy machine weighs on all alike:
- incremental: the path the live tailing keeps (one connection, 4 MB batches);
- bulk-4MB-checks: two connections, 4 MB batches, the foreign keys' checks kept;
- bulk-4MB: the same, the checks skipped (the test cluster's role is a superuser);
- bulk: the bulk path as shipped (16 MB batches);
- bulk-no-cache-walks: the same without §2.8's prompt-cache walks, to weigh them (run only when
  named: its figures are wrong by design).
Each run gets a fresh cluster and database; the tree is written once. PostgreSQL's CPU is that
of this run's cluster (its postmaster and backends), so other jobs on the machine are not counted;
on a shared machine CPU seconds move less than wall time. Another checkout's code, measured with
this script: `PYTHONPATH=<checkout>/daemon python tests/bench/backfill_steps.py --configs bulk`.
`--states`: what the run's connections did, sampled every 5 ms from pg_stat_activity (how many,
on average, were running a statement, waiting for a lock, waiting within a transaction for
retrod's next statement, or idle), to tell where the committing lanes wait.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import psycopg
from psycopg_pool import ConnectionPool

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import write_tree
from harness import database, postgres_cpu_s
from retrod.ingest import ingester as ingest
from retrod.ingest.ingester import Ingester
from retrod.store.store import Store


class _KeepingChecks(Store):
    def _skips_row_checks(self, conn: psycopg.Connection) -> bool:
        return False


# Drops the triggers that mark accounting.md §2.8's prompt-cache streams, so that no stream is walked:
# a copy that counts misses wrongly, only to weigh what the marks and walks cost (issue 29's
# budget). The walk's own constraint trigger stays (each bulk batch names it), and nothing is
# disabled: a disabled trigger of retrod's turns the bulk path's skip of row checks off (0011).
_NO_CACHE_WALKS = """
DO $$ DECLARE t RECORD; BEGIN
    FOR t IN SELECT tgrelid::regclass AS rel, tgname FROM pg_trigger
             WHERE NOT tgisinternal AND tgname LIKE '%cache%' AND tgname <> 'cache_stream_marked'
               AND tgrelid IN (SELECT oid FROM pg_class WHERE relnamespace = 'retrod'::regnamespace)
    LOOP EXECUTE format('DROP TRIGGER %I ON %s', t.tgname, t.rel); END LOOP;
END $$"""

# name: (bulk, store class, bulk batch bytes, SQL run on the migrated database first)
CONFIGS = {
    "incremental": (False, Store, ingest.BULK_BATCH_BYTES, None),
    "bulk-4MB-checks": (True, _KeepingChecks, 4 << 20, None),
    "bulk-4MB": (True, Store, 4 << 20, None),
    "bulk": (True, Store, ingest.BULK_BATCH_BYTES, None),
    "bulk-no-cache-walks": (True, Store, ingest.BULK_BATCH_BYTES, _NO_CACHE_WALKS),
}


def _own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# What a connection is doing, as pg_stat_activity says.
STATES = ("running", "waiting for a lock", "waiting for retrod in a transaction", "idle")
_ACTIVITY = """
SELECT CASE WHEN wait_event_type = 'Lock' THEN 'waiting for a lock'
            WHEN state = 'active' THEN 'running'
            WHEN state LIKE 'idle in transaction%' THEN 'waiting for retrod in a transaction'
            ELSE 'idle' END
FROM pg_stat_activity
WHERE backend_type = 'client backend' AND datname = current_database() AND pid <> pg_backend_pid()
"""


def _sample_states(url: str, stop: threading.Event, seen: Counter) -> None:
    """Every 5 ms until `stop`, the states of the other connections to the database, counted in
    `seen` (and the samples, under "samples")."""
    with psycopg.connect(url, autocommit=True) as conn:
        while not stop.is_set():
            seen.update(row[0] for row in conn.execute(_ACTIVITY))
            seen["samples"] += 1
            time.sleep(0.005)


def run_once(scratch: Path, tree: Path, name: str, states: bool = False) -> dict:
    bulk, store_class, bulk_batch, prepare = CONFIGS[name]
    ingest.BULK_BATCH_BYTES = bulk_batch
    seen: Counter = Counter()
    stop = threading.Event()
    with database(scratch, "steps") as url, \
            ConnectionPool(url, min_size=ingest.BULK_LANES + 1, max_size=ingest.BULK_LANES + 2, open=True) as pool:
        if prepare is not None:
            with pool.connection() as conn:
                conn.execute(prepare)
        ingester = Ingester(store_class(pool, "bench"), [tree], bulk_from=0 if bulk else None)
        sampler = threading.Thread(target=_sample_states, args=(url, stop, seen), daemon=True) if states else None
        if sampler is not None:
            sampler.start()
        cluster = scratch / "steps-pg"  # (this run's cluster only: the machine may be shared)
        own, postgres, start = _own_cpu_s(), postgres_cpu_s(cluster), time.perf_counter()
        stats = ingester.scan()
        seconds = time.perf_counter() - start
        own, postgres = _own_cpu_s() - own, postgres_cpu_s(cluster) - postgres
        stop.set()
        if sampler is not None:
            sampler.join()
    shutil.rmtree(scratch / "steps-pg")  # (stopped) the next run starts from a fresh cluster
    if stats.failed:
        raise RuntimeError(f"{name}: {stats.failed} files failed")
    result = {"seconds": seconds, "retrod_cpu_s": own, "postgres_cpu_s": postgres}
    if states:  # (the sampler's own CPU is counted in retrod's: a few percent)
        result.update({state: seen[state] / max(seen["samples"], 1) for state in STATES})
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--configs", default=",".join(name for name, config in CONFIGS.items() if config[3] is None),
                        help="which, comma-separated (default: all but bulk-no-cache-walks)")
    parser.add_argument("--states", action="store_true", help="also sample what the connections do")
    args = parser.parse_args()
    names = args.configs.split(",")
    with tempfile.TemporaryDirectory(prefix="retrod-steps-", dir="/tmp") as folder:
        scratch = Path(folder)
        os.chmod(scratch, 0o711)  # as root, the cluster runs as postgres and must reach its folder
        tree = scratch / "projects"
        write_tree(tree, int(args.mb * 1e6))
        runs: dict[str, list[dict]] = {name: [] for name in names}
        for _ in range(args.rounds):
            for name in names:
                runs[name].append(run_once(scratch, tree, name, args.states))
    print(f"| configuration | {args.mb:g} MB, median of {args.rounds} | CPU: retrod + PostgreSQL |")
    print("|---|---:|---:|")
    for name, results in runs.items():
        seconds, own, postgres = (statistics.median(r[key] for r in results)
                                  for key in ("seconds", "retrod_cpu_s", "postgres_cpu_s"))
        print(f"| {name} | {seconds:.2f} s | {own:.2f} + {postgres:.2f} s |")
    if args.states:
        print("\nConnections, on average (the pool keeps one more than the lanes, mostly idle):\n")
        print("| configuration | " + " | ".join(STATES) + " |")
        print("|---|" + "---:|" * len(STATES))
        for name, results in runs.items():
            print(f"| {name} | " + " | ".join(f"{statistics.median(r[s] for r in results):.2f}" for s in STATES) + " |")


if __name__ == "__main__":
    main()
