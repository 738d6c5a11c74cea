"""A transcript's last line without its newline is not written yet (JSON Lines, §2.1): `status`
and `doctor` name such files as waiting for their line's end, and leave those bytes out of the
lag, which would otherwise never reach zero (issue 28, item 13)."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import HOST, ingest
from retrod import health
from retrod.settings import Settings


def test_bytes_after_the_last_newline_wait_for_it_and_are_no_lag(db_url: str, projects: Path,
                                                                 tmp_path: Path) -> None:
    settings = Settings(database_url=db_url, projects_dir=str(projects), data_dir=tmp_path / "d", host_id=HOST)
    ingest(db_url, [projects])
    lines_and_a_start, only_a_start = sorted(projects.glob("*/*.jsonl"))[:2]
    with lines_and_a_start.open("a") as f:
        f.write('{"type":"user"}\n' * 2 + '{"type":"us')  # 32 bytes of whole lines, 11 of one begun
    with only_a_start.open("a") as f:
        f.write('{"type":"assi')  # 13

    for _ in range(2):  # before the daemon reads them, and after: the begun lines still wait
        s = health.status(settings)
        waiting = {"bytes": 24, "files": 2, "largest": [{"path": str(only_a_start), "bytes": 13},
                                                        {"path": str(lines_and_a_start), "bytes": 11}]}
        assert s["waiting_for_line_end"] == waiting
        text = health.render_status(s)
        assert "waiting:   24 bytes in 2 files wait for their line's end (not lag)\n" in text
        assert f"           13 bytes  {json.dumps(str(only_a_start))}\n" in text  # stored text: quoted
        ingest(db_url, [projects])
    assert s["lag"] == {"bytes": 0, "files": 0, "worst": []}

    checks = {c.name: c for c in health.doctor(settings)}
    line_ends = checks["line ends"]
    assert line_ends.level == "warn"
    assert line_ends.detail.startswith("2 files wait for their last line's end (24 bytes, not counted until it comes)")
    assert str(only_a_start) in line_ends.detail and str(lines_and_a_start) in line_ends.detail

    for path in (lines_and_a_start, only_a_start):
        with path.open("a") as f:
            f.write('"}\n')  # the lines end: bad lines now (their start was cut), counted as such
    assert health.status(settings)["waiting_for_line_end"] == {"bytes": 0, "files": 0, "largest": []}
    assert {c.name: c for c in health.doctor(settings)}["line ends"].ok


def test_the_lag_before_the_newline_still_counts(db_url: str, projects: Path, tmp_path: Path) -> None:
    """Whole lines not read yet are lag, the begun one after them is not."""
    settings = Settings(database_url=db_url, projects_dir=str(projects), data_dir=tmp_path / "d", host_id=HOST)
    ingest(db_url, [projects])
    path = sorted(projects.glob("*/*.jsonl"))[0]
    with path.open("a") as f:
        f.write('{"type":"user"}\n' * 10 + "x" * 200_000)  # a begun line longer than one read back
    s = health.status(settings)
    assert s["lag"] == {"bytes": 160, "files": 1, "worst": [{"path": str(path), "bytes": 160}]}
    assert s["waiting_for_line_end"]["bytes"] == 200_000
