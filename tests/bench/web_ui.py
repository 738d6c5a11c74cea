"""The web UI (`retrod ui`, issue 23) over a long history: 10,000 small real sessions and ~1 GB of
transcripts (a ~200 MB session among copies of the fixture projects), caught up on by
`retrod run --once`, then served by the daemon (`retrod run`, its UI on a free port).

- API answers: each of the JSON routes the pages stand on, asked `runs` times over one kept-alive
  connection; the server's own time (its Server-Timing header: from the request's arrival at the
  app to its answer) and the time the client saw, median and p95;
- first render: each page loaded in headless Chromium (Debian's, driven by Playwright by its
  path), from navigation to its load event (the session page: to its chart drawn), median;
- live: lines appended one at a time (a random 0.2–1 s apart) to a session, each timed from the
  write to the live page's figure changing, p50 / p95 / max;
- the same API answers (but the large session's) on another year of another shape
  (corpus.write_year: 10,000 sessions, 25 projects, 3 models, a session most hours), served by a
  daemon of its own.
"""

from __future__ import annotations

import http.client
import json
import random
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from importlib.util import find_spec
from pathlib import Path

from corpus import fresh_lines, write_many, write_session, write_tree, write_year
from harness import daemon, database, retrod_env, wait_for_log

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
LARGE = "dddddddd-4444-4444-8444-000000000004"
LIVE = "eeeeeeee-5555-4555-8555-000000000005"


def _responses(session: str) -> Iterator[str]:
    """Real lines of new responses (an assistant line with usage, one per message id): each one
    moves the session's figures, as Claude Code's next response does."""
    seen: set[str] = set()
    for line in fresh_lines(session):
        record = json.loads(line)
        message = record.get("message") if record.get("type") == "assistant" else None
        if isinstance(message, dict) and isinstance(message.get("usage"), dict) and message.get("id") not in seen:
            seen.add(message.get("id"))
            yield line


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, round(share * len(ordered)) - 1)]


def run(scratch: Path, smoke: bool) -> dict:
    sessions, tree_mb, large_mb, runs, appends = (200, 2, 2, 3, 3) if smoke else (10_000, 800, 200, 30, 30)
    root = scratch / "ui"
    projects, data = root / "projects", root / "data"
    # (a heavy user's year: 10,000 sessions over 365 days, as the trends benchmark spreads them)
    written = write_many(projects, sessions, spread_days=365) + write_tree(projects, tree_mb * 1_000_000, seed=23)
    written += write_session(projects, LARGE, large_mb * 1_000_000).stat().st_size
    live_path = projects / "-live-ui" / f"{LIVE}.jsonl"
    live_path.parent.mkdir(parents=True)
    live_lines = _responses(LIVE)
    live_path.write_text(next(live_lines))
    port = _free_port()
    results: dict = {"sessions": sessions, "mb": round(written / 1e6, 1)}
    with database(scratch, "ui") as url:
        started = time.monotonic()
        subprocess.run([sys.executable, "-m", "retrod", "run", "--once"], env=retrod_env(projects, data, url),
                       check=True, capture_output=True)
        results["catch_up_s"] = round(time.monotonic() - started, 1)
        with daemon(url, projects, data, RETROD_UI_PORT=str(port)) as process:
            wait_for_log(data / "daemon.log", "caught up", process, 600)
            token = (data / "ui-token").read_text().strip()
            small = next(projects.glob("-many-0/*.jsonl")).stem
            results["api"] = _api(port, token, runs, small)
            if not CHROMIUM.exists():
                results["browser"] = f"not measured: no {CHROMIUM} (apt-get install chromium)"
            elif find_spec("playwright") is None:
                results["browser"] = "not measured: no Playwright (pip install -e '.[test]')"
            else:
                results.update(_browser(port, token, runs=1 if smoke else 7, appends=appends, live_path=live_path,
                                        live_lines=live_lines, small=small))
    results["year"] = _year(scratch, sessions, runs)
    results["api_p95_ms_max"] = max(a["server_p95_ms"] for a in [*results["api"].values(),
                                                                 *results["year"]["api"].values()])
    return results


def _year(scratch: Path, sessions: int, runs: int) -> dict:
    """The API answers on corpus.write_year's sessions, its own daemon serving them."""
    projects, data = scratch / "ui-year" / "projects", scratch / "ui-year" / "data"
    mb = write_year(projects, sessions) / 1e6
    port = _free_port()
    with database(scratch, "ui-year") as url:
        subprocess.run([sys.executable, "-m", "retrod", "run", "--once"], env=retrod_env(projects, data, url),
                       check=True, capture_output=True)
        with daemon(url, projects, data, RETROD_UI_PORT=str(port)) as process:
            wait_for_log(data / "daemon.log", "caught up", process, 600)
            token = (data / "ui-token").read_text().strip()
            small = next(projects.glob("-year-0/*.jsonl")).stem
            return {"sessions": sessions, "mb": round(mb, 1), "api": _api(port, token, runs, small, large=False)}


def _routes(small: str, large: bool = True) -> dict[str, str]:
    today = datetime.now(UTC).date()
    week = (today - timedelta(days=6)).isoformat()
    return {
        "sessions, newest first": "/api/sessions",
        "sessions by cost": "/api/sessions?sort=cost",
        "sessions of a week by cost": f"/api/sessions?sort=cost&since={week}&until={today.isoformat()}",
        "sessions by tokens": "/api/sessions?sort=tokens",
        "sessions by efficiency": "/api/sessions?sort=efficiency",
        "sessions by wall clock": "/api/sessions?sort=wall",
        "sessions of a model by cost": "/api/sessions?sort=cost&model=claude-opus-4-6",
        "sessions searched": "/api/sessions?q=spotter",
        "sessions, page 100": "/api/sessions?page=100",
        **({"session ~200 MB, report + timeline": f"/api/sessions/{LARGE}"} if large else {}),
        "session, small": f"/api/sessions/{small}",
        "trends by week": "/api/trends?tz=UTC",
        "trends by day": "/api/trends?by=day&tz=UTC",
        "trends by month, per project": "/api/trends?by=month&split=project&tz=UTC",
        "live": "/api/live",
    }


def _api(port: int, token: str, runs: int, small: str, large: bool = True) -> dict:
    # (a first answer may take long: the code before issue 32 walked every session's prompt-cache
    # misses before its first trends or list answer; it is not timed)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request("GET", f"/?token={token}")  # a login: a session's id in the cookie
    login = conn.getresponse()
    login.read()
    cookie = login.headers["Set-Cookie"].split(";")[0]
    out = {}
    for name, path in _routes(small, large).items():
        server, client, size = [], [], 0
        for n in range(runs + 1):
            start = time.perf_counter()
            conn.request("GET", path, headers={"Cookie": cookie})
            answer = conn.getresponse()
            body = answer.read()
            took = time.perf_counter() - start
            if answer.status != 200:
                raise RuntimeError(f"{path}: {answer.status} {body[:200]!r}")
            if n == 0:
                json.loads(body)  # (the first, not timed: its plans and prices cached as every later one finds them)
                continue
            server.append(float(answer.headers["Server-Timing"].split("dur=")[1]))
            client.append(took * 1000)
            size = len(body)
        out[name] = {"server_median_ms": round(statistics.median(server), 1),
                     "server_p95_ms": round(_percentile(server, 0.95), 1),
                     "client_median_ms": round(statistics.median(client), 1), "bytes": size}
    conn.close()
    return out


def _browser(port: int, token: str, runs: int, appends: int, live_path: Path, live_lines: Iterator[str],
             small: str) -> dict:
    from playwright.sync_api import sync_playwright

    base = f"http://127.0.0.1:{port}"
    out: dict = {"render": {}}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{base}/?token={token}")  # a login: a session's id in the cookie
        page.wait_for_url(f"{base}/")
        for name, path, ready in (("sessions", "/", None), ("sessions by cost", "/?sort=cost", None),
                                  ("session ~200 MB", f"/sessions/{LARGE}", "#timeline canvas, #timeline.empty"),
                                  ("session, small", f"/sessions/{small}", "#timeline canvas, #timeline.empty"),
                                  ("trends", "/trends?tz=UTC", "#trends-chart canvas"),
                                  ("live", "/live", None)):
            times = []
            for _ in range(runs):
                start = time.perf_counter()
                page.goto(base + path, wait_until="load")
                if ready:
                    page.wait_for_selector(ready)
                times.append((time.perf_counter() - start) * 1000)
            out["render"][name] = round(statistics.median(times), 1)
        page.goto(f"{base}/live")
        page.wait_for_selector("#live-status.on")
        rng = random.Random(23)
        latencies, missed = [], 0
        for _ in range(appends):
            time.sleep(rng.uniform(0.2, 1.0))
            before = page.evaluate(f"""() => {{ const c = document.querySelector('#live tr[data-uuid="{LIVE}"]');
                                       return c ? c.textContent : null; }}""")
            with live_path.open("a") as f:
                f.write(next(live_lines))
            start = time.perf_counter()
            try:
                page.wait_for_function(f"""prev => {{ const c = document.querySelector('#live tr[data-uuid="{LIVE}"]');
                                          return c && c.textContent !== prev; }}""", arg=before, timeout=10_000)
                latencies.append((time.perf_counter() - start) * 1000)
            except Exception:  # noqa: BLE001 - a line whose figures did not move (e.g. one with no usage)
                missed += 1
        browser.close()
    out["live"] = {"appends": appends, "unchanged": missed,
                   "p50_ms": round(statistics.median(latencies), 1) if latencies else None,
                   "p95_ms": round(_percentile(latencies, 0.95), 1) if latencies else None,
                   "max_ms": round(max(latencies), 1) if latencies else None}
    out["render_ms_max"] = max(out["render"].values())
    return out


def table(r: dict) -> list[str]:
    lines = [(f"{r['sessions']:,} sessions besides, {r['mb']:,} MB of transcripts in all (caught up in "
             f"{r['catch_up_s']} s)"), "", "| API answer | server, median | server, p95 | client, median | bytes |",
             "|---|---:|---:|---:|---:|"]
    for name, a in r["api"].items():
        lines.append(f"| {name} | {a['server_median_ms']} ms | {a['server_p95_ms']} ms | {a['client_median_ms']} ms "
                     f"| {a['bytes']:,} |")
    if "render" in r:
        lines += ["", "| page | first render, median |", "|---|---:|"]
        lines += [f"| {name} | {ms} ms |" for name, ms in r["render"].items()]
        live = r["live"]
        lines += ["", "| live: appends | p50 | p95 | max | figures unchanged |", "|---:|---:|---:|---:|---:|",
                  (f"| {live['appends']} | {live['p50_ms']} ms | {live['p95_ms']} ms | {live['max_ms']} ms "
                  f"| {live['unchanged']} |")]
    else:
        lines += ["", r.get("browser", "")]
    if "year" in r:
        year = r["year"]
        lines += ["", (f"The other year (corpus.write_year): {year['sessions']:,} sessions, {year['mb']:,} MB, its"
                       " own daemon:"), "", "| API answer | server, median | server, p95 | client, median | bytes |",
                  "|---|---:|---:|---:|---:|"]
        lines += [f"| {name} | {a['server_median_ms']} ms | {a['server_p95_ms']} ms | {a['client_median_ms']} ms "
                  f"| {a['bytes']:,} |" for name, a in year["api"].items()]
    return lines
