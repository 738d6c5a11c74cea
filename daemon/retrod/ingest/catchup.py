"""`retrod sessions` without a daemon: the transcripts are read up to now first, as `retrod
report` first reads its own session's, so that the list is not what some earlier command
happened to read. With a daemon running, the daemon does the reading; the list then says only
when the daemon is still far behind (its catch-up under way)."""

from __future__ import annotations

from psycopg_pool import ConnectionPool

from .. import tracking
from ..basics.format import size
from ..service.daemon_lock import running_daemon
from ..settings import Settings
from ..store.store import OUTAGE, Store
from . import progress
from .ingester import BULK_FROM_BYTES, BULK_LANES, Ingester

# The connections a catch-up may use: the bulk path's lanes (a long history never read), and the
# scan's own statements.
POOL_SIZE = BULK_LANES + 1


def catch_up(settings: Settings, pool: ConnectionPool) -> str | None:
    """Read what every transcript gained since it was last read, unless a daemon runs on this
    data folder (it holds daemon.lock, and reads them itself). A note for the user when the
    sessions listed next may lack something, else None."""
    daemon = running_daemon(settings.data_dir)
    if daemon is not None:
        under_way = progress.read(settings.data_dir, daemon.get("pid"))
        if under_way is None:
            return None
        return (f"the daemon is still catching up ({size(under_way['bytes_done'])} of"
                f" {size(under_way['bytes_total'])} read): sessions it has not reached yet are"
                " missing or short")
    with pool.connection() as conn:
        if not tracking.may_write(conn):
            return None  # a team's reader lists what the members' daemons wrote, and writes nothing
    try:
        stats = Ingester(Store(pool, settings.host_id), settings.projects_roots(), settings.batch_bytes,
                         bulk_from=BULK_FROM_BYTES).scan()
    except OUTAGE as exc:  # e.g. a read-only standby: what was read before can still be listed
        return (f"the transcripts could not be read into the database ({' '.join(str(exc).split())}):"
                " sessions may be missing or short")
    if not stats.failed:
        return None
    files = "1 transcript file" if stats.failed == 1 else f"{stats.failed} transcript files"
    return f"{files} could not be read (logged above): sessions they hold may be missing or short"
