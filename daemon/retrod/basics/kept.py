"""What a process keeps between asks (trends' periods, briefs, the tasks' windows, whole reports):
a few values by key, the least recently asked dropped first. Whether a kept value is still right
is its owner's to check (each against the store's marks); this only holds them, within a count
and a weight, for the daemon's threads at once."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Generic, TypeVar

V = TypeVar("V")


class KeptValues(Generic[V]):
    """At most `most` values, weighing at most `most_weight` in all (`weigh`: a value's weight;
    a value heavier than that alone is not kept, as keeping it would drop every other)."""

    def __init__(self, most: int, most_weight: int | None = None, weigh: Callable[[V], int] = lambda _v: 1) -> None:
        self.most = most
        self.most_weight = most_weight
        self.weigh = weigh
        self._lock = threading.Lock()
        self._values: OrderedDict[Hashable, V] = OrderedDict()

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            value = self._values.get(key)
            if value is not None:
                self._values.move_to_end(key)
            return value

    def put(self, key: Hashable, value: V) -> None:
        with self._lock:
            self._values.pop(key, None)
            if self.most_weight is not None and self.weigh(value) > self.most_weight:
                return
            self._values[key] = value
            while len(self._values) > self.most or (
                    self.most_weight is not None and sum(map(self.weigh, self._values.values())) > self.most_weight):
                self._values.popitem(last=False)

    def values(self) -> list[V]:
        """The values kept, the least recently asked first (the tests')."""
        with self._lock:
            return list(self._values.values())

    def clear(self) -> None:
        with self._lock:
            self._values.clear()


def database_key(conn: Any, marks: Mapping[str, Any]) -> tuple:
    """Which database a kept value was read from, and as whom: the server and database the
    connection names, and as a statement of marks reads them (`database`: its oid, `started`: the
    cluster's start — a database made again is another —, `reader`: the role reading,
    `thresholds`: the member's price tiers, which the figures are summed by)."""
    info = conn.info
    return (info.host, info.port, info.dbname, marks["database"], marks["started"], marks["reader"],
            tuple(marks["thresholds"] or ()))
