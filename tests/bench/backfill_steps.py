"""The README's step table for the bulk path (issue 13): one backfill of a generated tree,
in-process, on each path in turn, with the CPU seconds of this process and of PostgreSQL's
backends beside the wall time.

    python tests/bench/backfill_steps.py                       # 100 MB, three rounds
    python tests/bench/backfill_steps.py --mb 10 --rounds 1    # seconds
    python tests/bench/backfill_steps.py --configs incremental,bulk

Configurations, each run once per round, in turn, so that a noisy machine weighs on all alike:
- incremental: the path the live tailing keeps (one connection, 4 MB batches);
- bulk-4MB-checks: two connections, 4 MB batches, the foreign keys' checks kept;
- bulk-4MB: the same, the checks skipped (the test cluster's role is a superuser);
- bulk: the bulk path as shipped (16 MB batches).
Each run gets a fresh cluster and database; the tree is written once. PostgreSQL's CPU is that
of this run's cluster (its postmaster and backends), so other jobs on the machine are not counted;
on a shared machine CPU seconds move less than wall time. Another checkout's code, measured with
this script: `PYTHONPATH=<checkout>/daemon python tests/bench/backfill_steps.py --configs bulk`.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
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


# name: (bulk, store class, bulk batch bytes)
CONFIGS = {
    "incremental": (False, Store, ingest.BULK_BATCH_BYTES),
    "bulk-4MB-checks": (True, _KeepingChecks, 4 << 20),
    "bulk-4MB": (True, Store, 4 << 20),
    "bulk": (True, Store, ingest.BULK_BATCH_BYTES),
}


def _own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_once(scratch: Path, tree: Path, name: str) -> dict:
    bulk, store_class, bulk_batch = CONFIGS[name]
    ingest.BULK_BATCH_BYTES = bulk_batch
    with database(scratch, "steps") as url, \
            ConnectionPool(url, min_size=ingest.BULK_LANES + 1, max_size=ingest.BULK_LANES + 2, open=True) as pool:
        ingester = Ingester(store_class(pool, "bench"), [tree], bulk_from=0 if bulk else None)
        cluster = scratch / "steps-pg"  # (this run's cluster only: the machine may be shared)
        own, postgres, start = _own_cpu_s(), postgres_cpu_s(cluster), time.perf_counter()
        stats = ingester.scan()
        seconds = time.perf_counter() - start
        own, postgres = _own_cpu_s() - own, postgres_cpu_s(cluster) - postgres
    shutil.rmtree(scratch / "steps-pg")  # (stopped) the next run starts from a fresh cluster
    if stats.failed:
        raise RuntimeError(f"{name}: {stats.failed} files failed")
    return {"seconds": seconds, "retrod_cpu_s": own, "postgres_cpu_s": postgres}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--configs", default=",".join(CONFIGS), help="which, comma-separated (default: all)")
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
                runs[name].append(run_once(scratch, tree, name))
    print(f"| configuration | {args.mb:g} MB, median of {args.rounds} | CPU: retrod + PostgreSQL |")
    print("|---|---:|---:|")
    for name, results in runs.items():
        seconds, own, postgres = (statistics.median(r[key] for r in results)
                                  for key in ("seconds", "retrod_cpu_s", "postgres_cpu_s"))
        print(f"| {name} | {seconds:.2f} s | {own:.2f} + {postgres:.2f} s |")


if __name__ == "__main__":
    main()
