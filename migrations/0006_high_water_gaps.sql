-- accounting.md §2.3 as changed: a gap runs from the high-water mark of the earlier events (the latest
-- timestamp so far), not from the previous line's. Claude Code sometimes stamps a line earlier
-- than the one before it; measuring the next gap from that earlier stamp counted the same time
-- twice (claude + tool + human came out longer than the wall clock).
--
-- The stored events are recomputed in place rather than re-read: a transcript Claude Code has
-- deleted since cannot be read again, and its rows are the only record of it. Then the gap
-- rollups are rebuilt from the events, and each main file's fold state gets the high-water
-- mark it resumes from (and the earliest event time, which `retrod sessions` sorts by).

UPDATE retrod.events e
SET prev_ts = h.high,
    kind = CASE WHEN e.ts > h.high THEN e.kind END,
    gap_us = CASE WHEN e.ts > h.high THEN retrod.ts_to_us(e.ts) - retrod.ts_to_us(h.high) ELSE 0 END
FROM (
    SELECT file_id, "offset",
           max(ts) OVER (PARTITION BY file_id ORDER BY "offset"
                         ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS high
    FROM retrod.events WHERE ts IS NOT NULL
) h
WHERE e.file_id = h.file_id AND e."offset" = h."offset";

-- Rows an UPDATE changes are not seen by the INSERT/DELETE rollup triggers: rebuild them.
DELETE FROM retrod.gap_pieces;
DELETE FROM retrod.gap_spans;
DELETE FROM retrod.event_minutes;
INSERT INTO retrod.gap_pieces
SELECT e.file_id, e."offset", p.minute, e.session_uuid, e.kind, p.piece_start, p.piece_end
FROM retrod.events e, retrod.pieces_of(e.prev_ts, e.ts) p
WHERE e.kind IS NOT NULL;
INSERT INTO retrod.gap_spans
SELECT e.file_id, e."offset", e.session_uuid, e.kind, sp.span_start, sp.span_end
FROM retrod.events e, retrod.span_of(e.prev_ts, e.ts) sp
WHERE e.kind IS NOT NULL;
SELECT retrod.add_event_minutes(ARRAY(SELECT e FROM retrod.events e WHERE e.session_uuid = s.session_uuid), 1)
FROM (SELECT DISTINCT session_uuid FROM retrod.events) s;

UPDATE retrod.files f
SET state = (f.state - 'last_event_us') || jsonb_build_object(
        'high_water_us', retrod.ts_to_us(t.last_ts),
        'first_event_us', retrod.ts_to_us(t.first_ts),
        'max_gap_us', t.max_gap_us)
FROM (
    SELECT f.id, max(e.ts) AS last_ts, min(e.ts) AS first_ts, coalesce(max(e.gap_us), 0) AS max_gap_us
    FROM retrod.files f LEFT JOIN retrod.events e ON e.file_id = f.id
    WHERE f.kind = 'main' GROUP BY f.id
) t
WHERE f.id = t.id;

-- The `away` class (a human gap longer than RETROD_AWAY_AFTER_S) is decided when a report is
-- read, so that changing the threshold needs no re-ingest: the long human gaps of a session are
-- found through this index, and there are few of them (each is at least the threshold long).
CREATE INDEX events_human_gaps ON retrod.events (session_uuid, gap_us) WHERE kind = 'human';
