"""The tasks' window figures kept between reports (report/kept_windows.py, migration 0038): every
ask gives each task exactly the figures that summing all its windows gives (model's
_task_window_figures, one window_figures statement over every window), whatever was committed
between two asks — a line read later whose time falls in a closed window, a row changed by hand,
a plan call added, the current task's open window growing — and a second ask with nothing
changed sums no closed window again."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from psycopg.rows import dict_row

import plan_transcripts
from conftest import FIXTURES, fresh_database
from helpers import ingest, older_migrations, window_marks_cover_the_rows
from plan_transcripts import Transcript, at, session_id
from retrod.report import kept_windows, markdown, model
from retrod.store.migrate import load, migrate

H = 3600  # (windows hours apart: what a commit touched is told by the hour)
TWO_WINDOWS = session_id(811)  # task 1 "A": [10, 2h) and [4h, 6h); task 2 "B": [2h, 4h); none open
OPEN = session_id(812)  # task 1 "A": [10, open)
PLANNED = {  # fixture sessions with a plan (TodoWrite), by project folder
    "-src-deep-manifest": "a7da6a22-facc-4fcd-8bab-f83c87862004",
    "-experiments-worktrees": "ef958aa1-0e93-49f0-bb71-150f63befcd1",
    "-Users-dain-workspace-danieldemmel-me-next": "b25638d7-b104-4f06-a797-70ac33d069ed",
}


@pytest.fixture(autouse=True)
def nothing_kept() -> None:
    kept_windows.forget()


def _member(conn: psycopg.Connection) -> str:
    return conn.execute("SELECT current_user").fetchone()[0]


def _normal(figures: dict[str, dict]) -> dict[str, dict]:
    """Rows as compared: without the statement's id, the price groups in one order."""
    out = {}
    for n, row in figures.items():
        row = {k: v for k, v in row.items() if k != "id"}
        row["by_model"] = sorted(row["by_model"], key=lambda g: (g["model"], str(g["day"]), g["fast"], g["tier_floor"]))
        out[n] = row
    return out


def kept_and_summed(conn: psycopg.Connection, session: str,
                    phases: list[dict] | None = None) -> tuple[dict, dict, list[dict]]:
    """The tasks' figures as a report asks them (kept), as summing every window gives them, and
    the windows the kept ask summed. With `phases` (`{id, s, e}`), the phases' figures too, under
    "phase <id>" beside the tasks' numbers."""
    args = {"session": session, "member": _member(conn), "away_us": int(model.AWAY_AFTER_S * 1_000_000)}
    asked: list[dict] = []

    def window_figures(windows: list[dict]) -> dict[str, dict]:
        asked.extend(windows)
        return model.window_figures(cur, args, windows)

    with conn.cursor(row_factory=dict_row) as cur:
        _plan, kept, by_phase, _memo = kept_windows.figures(cur, args, lambda: model._plan(cur, args),
                                                            window_figures, phases or ())
        summed = model._task_window_figures(cur, args, model._plan(cur, args))
        if phases:
            kept.update({f"phase {i}": fig for i, fig in by_phase.items()})
            summed.update({f"phase {i}": fig for i, fig in model.window_figures(cur, args, phases).items()})
    return _normal(kept), _normal(summed), asked


def _append(path: Path, first_id: int, lines: Callable[[Transcript], Transcript]) -> None:
    """Lines added to a transcript (message ids from `first_id`: not copies of the earlier ones)."""
    more = Transcript(path.stem)
    more.ids = first_id
    with path.open("a", encoding="utf-8") as out:
        out.write("".join(json.dumps(line) + "\n" for line in lines(more).lines))


class TestFixtures:
    def test_kept_figures_are_the_summed_ones_first_and_again(self, db_url: str, tmp_path: Path) -> None:
        root = tmp_path / "projects"
        for folder in PLANNED:
            shutil.copytree(FIXTURES / folder, root / folder)
        ingest(db_url, [root])
        with psycopg.connect(db_url) as conn:
            for session in PLANNED.values():
                kept, summed, asked = kept_and_summed(conn, session)
                assert summed and kept == summed, session
                assert asked  # a first ask sums every window
                kept, summed, asked = kept_and_summed(conn, session)
                assert kept == summed, session
                assert all(w["e"] is None for w in asked), session  # again: only an open window
                report = model.build(conn, session)
                assert [t["requests"] for t in report["plan"]["tasks"]] == [
                    sum(g["parts"] for g in summed[str(n)]["by_model"]) for n in range(1, len(summed) + 1)]
                markdown.render(report)


class TestChanges:
    def _write(self, root: Path) -> Path:
        return (Transcript(TWO_WINDOWS).user(0)
                .todos(10, ("A", "in_progress"), ("B", "pending")).say(15)
                .todos(2 * H, ("A", "pending"), ("B", "in_progress")).say(2 * H + 5)
                .todos(4 * H, ("A", "in_progress"), ("B", "completed")).say(4 * H + 5)
                .todos(6 * H, ("A", "completed"), ("B", "completed")).say(6 * H + 5)).write(root)

    def test_a_line_read_later_in_a_closed_window(self, db_url: str, tmp_path: Path) -> None:
        """A line whose time falls in task A's first window, read after the figures were kept."""
        root = tmp_path / "projects"
        path = self._write(root)
        ingest(db_url, [root])
        with psycopg.connect(db_url) as conn:
            before, summed, _ = kept_and_summed(conn, TWO_WINDOWS)
            assert before == summed
            _append(path, 100, lambda t: t.say(17).say(18))
            ingest(db_url, [root])
            after, summed, asked = kept_and_summed(conn, TWO_WINDOWS)
            assert after == summed
            assert after["1"] != before["1"]
            assert after["2"] == before["2"]
            touched = {(w["s"], w["e"]) for w in asked}  # the window it touched, not B's hours later
            assert (at(10), at(2 * H)) in touched and (at(2 * H), at(4 * H)) not in touched

    def test_a_line_behind_the_high_water_mark(self, db_url: str, tmp_path: Path) -> None:
        """A tool result stamped inside task A's first window, read after the session's last line:
        stored behind the high-water mark (its prev_ts later than its time), it still counts there
        (its bytes), so the window is summed again though the line's span is no gap."""
        root = tmp_path / "projects"
        path = self._write(root)
        ingest(db_url, [root])
        with psycopg.connect(db_url) as conn:
            before, summed, _ = kept_and_summed(conn, TWO_WINDOWS)
            assert before == summed
            late = {"type": "user", "sessionId": TWO_WINDOWS, "timestamp": plan_transcripts.ts(H),
                    "message": {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_late", "content": "x" * 5000}]}}
            with path.open("a", encoding="utf-8") as out:
                out.write(json.dumps(late) + "\n")
            ingest(db_url, [root])
            prev_ts, ts = conn.execute("SELECT prev_ts, ts FROM retrod.events WHERE session_uuid = %s AND ts = %s",
                                       (TWO_WINDOWS, at(H))).fetchone()
            assert prev_ts > ts  # (behind the mark)
            after, summed, _ = kept_and_summed(conn, TWO_WINDOWS)
            assert after == summed
            assert after["1"]["tool_result_bytes"] == before["1"]["tool_result_bytes"] + 5000
            window_marks_cover_the_rows(conn)

    def test_a_row_changed_by_hand(self, db_url: str, tmp_path: Path) -> None:
        """Whatever wrote the change (here a DELETE of raw rows, the rollups following); a phase's
        window (the report's phases are kept the same way) as a task's."""
        root = tmp_path / "projects"
        self._write(root)
        ingest(db_url, [root])
        phases = [{"id": 7, "s": at(0), "e": at(3 * H)}, {"id": 8, "s": at(5 * H), "e": at(6 * H)}]
        with psycopg.connect(db_url, autocommit=True) as conn:
            before, summed, _ = kept_and_summed(conn, TWO_WINDOWS, phases)
            assert before == summed
            _again, _summed, asked = kept_and_summed(conn, TWO_WINDOWS, phases)
            assert not asked
            deleted = conn.execute("DELETE FROM retrod.requests WHERE session_uuid = %s AND ts >= %s AND ts < %s",
                                   (TWO_WINDOWS, at(2 * H), at(4 * H))).rowcount
            assert deleted
            after, summed, _ = kept_and_summed(conn, TWO_WINDOWS, phases)
            assert after == summed
            assert after["2"] != before["2"] and after["1"] == before["1"]
            assert after["phase 7"] != before["phase 7"] and after["phase 8"] == before["phase 8"]

    def test_a_plan_call_added(self, db_url: str, tmp_path: Path) -> None:
        root = tmp_path / "projects"
        path = self._write(root)
        ingest(db_url, [root])
        with psycopg.connect(db_url) as conn:
            before, _summed, _ = kept_and_summed(conn, TWO_WINDOWS)
            _append(path, 200, lambda t: t.todos(7 * H, ("A", "completed"), ("B", "in_progress")).say(7 * H + 5))
            ingest(db_url, [root])
            after, summed, _ = kept_and_summed(conn, TWO_WINDOWS)
            assert after == summed
            assert after["2"] != before["2"]  # B current again, its window open until now

    def test_a_live_sessions_open_window_is_summed_at_every_ask(
            self, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """A task still current in a session with rows in the last two hours: its open window,
        until now, moves with the session, and is never kept."""
        monkeypatch.setattr(plan_transcripts, "BASE", datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=10))
        root = tmp_path / "projects"
        Transcript(OPEN).user(0).todos(10, ("A", "in_progress")).say(20).write(root)
        ingest(db_url, [root])
        with psycopg.connect(db_url) as conn:
            for _ in range(2):
                kept, summed, asked = kept_and_summed(conn, OPEN)
                assert kept == summed
                assert [(w["s"], w["e"]) for w in asked] == [(at(10), None)]

    def test_the_open_window_grows(self, db_url: str, tmp_path: Path) -> None:
        """A task still current in a session at rest (its open window kept, as its figures until
        now are those until any time later): a line read later, after its start, sums it again."""
        root = tmp_path / "projects"
        path = Transcript(OPEN).user(0).todos(10, ("A", "in_progress")).say(20).write(root)
        ingest(db_url, [root])
        with psycopg.connect(db_url) as conn:
            before, summed, _ = kept_and_summed(conn, OPEN)
            assert before == summed
            _again, _summed, asked = kept_and_summed(conn, OPEN)
            assert not asked
            _append(path, 300, lambda t: t.say(30).say(40))
            ingest(db_url, [root])
            after, summed, _ = kept_and_summed(conn, OPEN)
            assert after == summed
            assert sum(g["parts"] for g in after["1"]["by_model"]) == sum(
                g["parts"] for g in before["1"]["by_model"]) + 2


def test_rows_stored_before_the_migration_are_marked(pg_cluster, tmp_path: Path) -> None:
    """Migration 0038 on a database with rows: each hour holding one is marked, the plan's too."""
    before = older_migrations(tmp_path / "before", lambda version: version < 38)
    root = tmp_path / "projects"
    shutil.copytree(FIXTURES / "-src-deep-manifest", root / "-src-deep-manifest")
    with fresh_database(pg_cluster) as url, psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP SCHEMA retrod CASCADE")
        conn.execute("DROP TABLE cc_session_phases, cc_sessions")
        migrate(conn, before)
        ingest(url, [root])
        assert migrate(conn) == [m.version for m in load() if m.version >= 38]
        window_marks_cover_the_rows(conn)
        assert conn.execute("SELECT sum(plan_changes) FROM retrod.window_marks").fetchone()[0] > 0
        session = PLANNED["-src-deep-manifest"]
        kept, summed, _ = kept_and_summed(conn, session)
        assert kept == summed


def test_the_least_recently_asked_session_goes_past_the_windows_kept(
        db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "projects"
    Transcript(OPEN).user(0).todos(10, ("A", "in_progress")).say(20).write(root)
    TestChanges()._write(root)
    ingest(db_url, [root])
    monkeypatch.setattr(kept_windows._kept, "most_weight", 3)
    with psycopg.connect(db_url) as conn:
        kept_and_summed(conn, OPEN)
        kept_and_summed(conn, TWO_WINDOWS)  # three closed windows: with OPEN's one, more than 3
        assert [len(k.windows) for k in kept_windows._kept.values()] == [3]
        kept, summed, asked = kept_and_summed(conn, TWO_WINDOWS)
        assert kept == summed and not asked
        kept, summed, asked = kept_and_summed(conn, OPEN)
        assert kept == summed and asked  # (gone: summed again)
