"""What a process keeps between asks (basics/kept.py): the least recently asked value goes first,
past a count or a weight, and a value heavier than the weight allowed is not kept at all."""

from __future__ import annotations

from retrod.basics.kept import KeptValues


def test_past_the_count_the_least_recently_asked_goes() -> None:
    kept: KeptValues[str] = KeptValues(2)
    kept.put("a", "A")
    kept.put("b", "B")
    assert kept.get("a") == "A"  # (asked: now the most recent)
    kept.put("c", "C")
    assert kept.get("b") is None and kept.values() == ["A", "C"]
    kept.put("a", "A2")  # (kept again: replaced, the most recent)
    assert kept.values() == ["C", "A2"]


def test_past_the_weight_the_least_recently_asked_go_and_a_value_too_heavy_is_not_kept() -> None:
    kept: KeptValues[list[int]] = KeptValues(10, most_weight=5, weigh=len)
    kept.put("a", [1, 1])
    kept.put("b", [1, 1])
    kept.put("c", [1, 1, 1])  # 7 > 5: "a" goes, then 5
    assert kept.values() == [[1, 1], [1, 1, 1]]
    kept.put("d", [1] * 6)  # heavier than all allowed: not kept, nothing dropped for it
    assert kept.get("d") is None and kept.values() == [[1, 1], [1, 1, 1]]
    kept.put("b", [1] * 6)  # a value kept again too heavy: the old one goes too (it is stale)
    assert kept.get("b") is None and kept.values() == [[1, 1, 1]]
    kept.clear()
    assert kept.values() == []
