"""Hand-made transcripts with web searches (accounting.md §2.2 "Web searches", §2.7; issue 29).

No public transcript in the fixture corpus made a web search (every `server_tool_use` there says
`{"web_search_requests":0,"web_fetch_requests":0}`), so these are written in the shape real
usage objects have (Claude Code 2.1.38+; accounting.md §2.2 "Web searches"): `server_tool_use` beside
the token fields, in the top-level usage and in each of `usage.iterations[]`.

Prices by hand (genai-prices on 2026-04-01; USD per million tokens, and $10 per 1,000 web
searches = $0.01 each): claude-opus-4-6 5 / 25, claude-haiku-4-5 1 / 5, both with web searches;
claude-3-haiku 0.25 / 1.25 and no web-search price; claude-imaginary-9 no price at all.
"""

from __future__ import annotations

import json
from pathlib import Path

SESSION = "eeeeeeee-0029-4000-8000-000000000001"
CHEAP = "eeeeeeee-0029-4000-8000-000000000002"  # no web search: costs more in tokens than SESSION's ...
SLUG = "-home-me-search"
OPUS, HAIKU, OLD_HAIKU, UNKNOWN = "claude-opus-4-6", "claude-haiku-4-5-20251001", "claude-3-haiku-20240307", \
    "claude-imaginary-9"


def at(second: int) -> str:
    return f"2026-04-01T10:{second // 60:02d}:{second % 60:02d}.000Z"


def usage(inp: int, out: int, searches: object = 0, **extra: object) -> dict:
    """A usage object as Claude Code writes it (`searches`: web_search_requests as given, any type)."""
    return {"input_tokens": inp, "output_tokens": out, "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
            "server_tool_use": {"web_search_requests": searches, "web_fetch_requests": 0},
            "service_tier": "standard", **extra}


def assistant(key: str, second: int, model: str, use: dict, session: str = SESSION) -> dict:
    return {"type": "assistant", "sessionId": session, "timestamp": at(second), "requestId": f"req_{key}",
            "uuid": f"{session[:8]}-{key}-{second}",
            "message": {"id": f"msg_{key}", "type": "message", "role": "assistant", "model": model,
                        "content": [{"type": "text", "text": "found it"}], "usage": use}}


def lines() -> list[dict]:
    """SESSION's transcript. Per part (model: input, output, web searches):"""
    it1 = {**usage(10, 20, 3), "model": OPUS, "type": "message"}
    it2 = {**usage(10, 20, 1), "model": HAIKU, "type": "message"}
    return [
        {"type": "user", "sessionId": SESSION, "timestamp": at(0), "uuid": "u0",
         "message": {"role": "user", "content": "search the web"}},
        # w1: a streaming snapshot before the searches, then the final record: opus 100, 50, 2
        assistant("w1", 1, OPUS, usage(100, 10, 0)),
        assistant("w1", 2, OPUS, usage(100, 50, 2)),
        # w2: two iterations covering the top level: opus 10, 20, 3 and haiku 10, 20, 1 (the top
        # level's 5 is not a part's)
        assistant("w2", 3, OPUS, usage(20, 40, 5, iterations=[it1, it2])),
        # w3 bool, w4 negative, w5 string, w7 float: opus 1, 1, 0 each
        assistant("w3", 4, OPUS, usage(1, 1, True)),
        assistant("w4", 5, OPUS, usage(1, 1, -4)),
        assistant("w5", 6, OPUS, usage(1, 1, "3")),
        assistant("w7", 7, OPUS, usage(1, 1, 2.0)),
        # w6: an unknown model's searches: unknown 1, 1, 4 (unpriced)
        assistant("w6", 8, UNKNOWN, usage(1, 1, 4)),
        # w8: two records tying on the usage tuple: the first line counts (accounting.md §2.2: path,
        # then line), whatever their searches: opus 1, 2, 1
        assistant("w8", 9, OPUS, usage(1, 2, 1)),
        assistant("w8", 9, OPUS, usage(1, 2, 0)),
        # w9: a model with token prices and no web-search price: old haiku 1,000, 100, 1
        assistant("w9", 10, OLD_HAIKU, usage(1000, 100, 1)),
    ]


# By hand (USD): opus parts  w1 100×5 + 50×25 = 1,750 µ$ + 2 searches
#                            w2 10×5 + 20×25 = 550 µ$ + 3 searches
#                            w3, w4, w5, w7 4 × (5 + 25) = 120 µ$; w8 5 + 50 = 55 µ$ + 1 search
#   opus: 2,475 µ$ + 6 × $0.01 = 0.062475; haiku: 10×1 + 20×5 = 110 µ$ + $0.01 = 0.01011;
#   old haiku: 1,000×0.25 + 100×1.25 = 375 µ$ (its search unpriced); unknown: unpriced.
WEB_SEARCHES = {OPUS: 6, HAIKU: 1, OLD_HAIKU: 1, UNKNOWN: 4}
COST_USD = {OPUS: 0.062475, HAIKU: 0.01011, OLD_HAIKU: None, UNKNOWN: None}
TOTAL_USD = 0.07296  # 0.062475 + 0.01011 + 0.000375
# With RETROD_PRICES naming opus (input 1, output 2 per million) and the unknown model (1, 1):
# opus tokens 115 input, 76 output = 267 µ$ + its 6 searches at the package's $0.01 = 0.060267;
# the unknown model's tokens 2 µ$, its searches still unpriced (the package knows no price).
OVERRIDE = {OPUS: {"input": 1, "output": 2, "cache_read": 0, "cache_create_5m": 0, "cache_create_1h": 0},
            UNKNOWN: {"input": 1, "output": 1, "cache_read": 0, "cache_create_5m": 0, "cache_create_1h": 0}}
OVERRIDE_COST_USD = {OPUS: 0.060267, HAIKU: 0.01011, OLD_HAIKU: None, UNKNOWN: None}
OVERRIDE_TOTAL_USD = 0.070754  # 0.060267 + 0.01011 + 0.000375 + 0.000002


def cheap_lines() -> list[dict]:
    """CHEAP: one opus request of 3,000 input tokens, no search: $0.015, less than SESSION's
    0.07296 with its searches, more than SESSION's 0.00296 of tokens alone — so SESSION ranks
    above CHEAP by cost only where its searches are priced."""
    return [{"type": "user", "sessionId": CHEAP, "timestamp": at(0), "uuid": "c0",
             "message": {"role": "user", "content": "no search"}},
            assistant("c1", 1, OPUS, usage(3000, 0, 0), session=CHEAP)]


def write(root: Path) -> None:
    """Both sessions' transcripts under `root` (a projects folder)."""
    for session, content in ((SESSION, lines()), (CHEAP, cheap_lines())):
        path = root / SLUG / f"{session}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(line) + "\n" for line in content))
