-- One timeline over the copies of a main transcript (accounting.md §2.3, §2.4; issue 19).
--
-- Claude Code names a project folder after the working folder, so a project folder copied or
-- moved leaves a session's main transcript at two paths, mostly the same lines. Its timeline is
-- its main transcripts in the order of their folders' names, each in file order, and a line
-- whose uuid is a non-empty string counts once, where it is first met: time, compactions and
-- tool-result bytes no longer double.
--
-- Each file's events are still folded on their own (fold.py: the file's high-water mark), which
-- is the session's timeline whenever the session has one main transcript and no uuid repeats.
-- Otherwise store/queries.sql `retime_sessions` works the session's timeline out again across
-- its files and updates the rows that change (the trigger below moves the rollups).
--
-- line_uuid: the line's uuid; gap_class: the class of the gap the line closes when it closes
-- one; compaction: a compact_boundary line (no event: ts stays NULL); counted: first met.
ALTER TABLE retrod.events
    ADD COLUMN line_uuid TEXT COLLATE "C",
    ADD COLUMN gap_class TEXT CHECK (gap_class IN ('claude', 'tool', 'human')),
    ADD COLUMN compaction BOOLEAN NOT NULL DEFAULT false,
    ADD COLUMN counted BOOLEAN NOT NULL DEFAULT true;
CREATE INDEX events_line_uuid ON retrod.events (session_uuid, line_uuid) WHERE line_uuid IS NOT NULL;
-- A session with a line that does not count (a copy met before) is worked out again after each
-- batch: its file's own high-water mark may hold the copy's time.
CREATE INDEX events_uncounted ON retrod.events (session_uuid) WHERE NOT counted;

-- Rows from before: their class where they closed a gap. Each transcript still on disk is read
-- again from its start (fold.RULES 2), which gives its rows their uuid and class. Those of
-- transcripts Claude Code has deleted since keep no uuid: they count as they did.
UPDATE retrod.events SET gap_class = kind WHERE kind IS NOT NULL;

-- Compactions were a count in each main file's fold state; they are rows now. Until a file is
-- read again, its count stands as rows of their own, at negative offsets (store.rewind deletes
-- them when the file is read again, since its real rows come then); a deleted transcript keeps
-- them. (db_role carried over: 0008's end.)
INSERT INTO retrod.events (file_id, "offset", session_uuid, ts, prev_ts, kind, gap_us, tool_result_bytes,
                           compaction, db_role)
SELECT f.id, -n, f.session_uuid, NULL, NULL, NULL, 0, 0, true, f.db_role
FROM retrod.files f, generate_series(1, (f.state ->> 'compactions')::int) n
WHERE f.kind = 'main' AND f.session_uuid IS NOT NULL AND jsonb_typeof(f.state -> 'compactions') = 'number';
-- ... and the fold state no longer keeps them, nor the longest gap (the report bounds its search
-- for long gaps by the spans themselves).
UPDATE retrod.files SET state = state - 'compactions' - 'max_gap_us' WHERE kind = 'main';

-- The classified time and tool output per minute: of counted lines only, and by member (§3).
ALTER TABLE retrod.event_minutes DROP CONSTRAINT event_minutes_pkey,
    ADD PRIMARY KEY (session_uuid, minute, db_role);

CREATE OR REPLACE FUNCTION retrod.add_event_minutes(changed retrod.events[], direction INT)
    RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO retrod.event_minutes AS m (session_uuid, minute, claude_us, tool_us, human_us, tool_result_bytes)
    SELECT session_uuid, minute, direction * coalesce(sum(us) FILTER (WHERE kind = 'claude'), 0),
           direction * coalesce(sum(us) FILTER (WHERE kind = 'tool'), 0),
           direction * coalesce(sum(us) FILTER (WHERE kind = 'human'), 0), direction * sum(bytes)
    FROM (
        SELECT c.session_uuid, p.minute, c.kind, retrod.interval_us(p.piece_end - p.piece_start) AS us,
               0 AS bytes
        FROM unnest(changed) c, retrod.pieces_of(c.prev_ts, c.ts) p WHERE c.kind IS NOT NULL
        UNION ALL
        SELECT session_uuid, retrod.minute_of(ts), NULL, 0, tool_result_bytes
        FROM unnest(changed) c WHERE tool_result_bytes <> 0 AND counted
    ) d
    GROUP BY 1, 2
    ON CONFLICT (session_uuid, minute, db_role) DO UPDATE SET
        claude_us = m.claude_us + excluded.claude_us, tool_us = m.tool_us + excluded.tool_us,
        human_us = m.human_us + excluded.human_us,
        tool_result_bytes = m.tool_result_bytes + excluded.tool_result_bytes;
    IF direction < 0 THEN
        DELETE FROM retrod.event_minutes m
        WHERE m.session_uuid IN (SELECT DISTINCT session_uuid FROM unnest(changed)) AND m.db_role = current_user
          AND (m.claude_us, m.tool_us, m.human_us, m.tool_result_bytes) = (0, 0, 0, 0);
    END IF;
END $$;

-- The timeline worked out again moves a line's gap: its old one leaves the rollups, its new one
-- enters them (a row whose gap is unchanged is not updated: queries.sql, retime_sessions).
CREATE OR REPLACE FUNCTION retrod.events_changed() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM retrod.add_event_minutes(ARRAY(SELECT o::retrod.events FROM old_rows o), -1);
    END IF;
    IF TG_OP = 'UPDATE' THEN
        DELETE FROM retrod.gap_spans g USING old_rows o
        WHERE (g.file_id, g."offset", g.db_role) = (o.file_id, o."offset", o.db_role);
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO retrod.gap_spans
        SELECT e.file_id, e."offset", e.session_uuid, e.kind, sp.span_start, sp.span_end
        FROM new_rows e, retrod.span_of(e.prev_ts, e.ts) sp
        WHERE e.kind IS NOT NULL;
        PERFORM retrod.add_event_minutes(ARRAY(SELECT n::retrod.events FROM new_rows n), 1);
    END IF;
    RETURN NULL;  -- DELETE: gap_spans follow by their foreign key
END $$;

CREATE TRIGGER events_updated AFTER UPDATE ON retrod.events
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION retrod.events_changed();
ALTER TABLE retrod.events ENABLE ALWAYS TRIGGER events_updated;  -- as every trigger of retrod's (0011)
