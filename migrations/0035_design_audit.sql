-- accounting.md §2.2: records of one request whose usage tuples tie are told apart by the path of
-- their file below the projects root (code-point), then line number — not by what they hold.
-- A request keeps the place of the record whose usage counts, so that a record read later
-- (another file, another chunk, after a restart) is compared with it exactly
-- (upsert_requests; fold.Request.usage_beaten_by).
--
-- Rows stored before this migration know no place (NULL), and lose a tie to any record read
-- again: files read before are read again from their start (fold.RULES 7), keeping their rows,
-- so every request of a file still present ends with the record the rule picks. A request whose
-- tying records are only in deleted transcripts keeps the record chosen before.
-- (IF NOT EXISTS: a test stores rows as an older schema held them with today's ingest.)
ALTER TABLE retrod.requests ADD COLUMN IF NOT EXISTS usage_path TEXT COLLATE "C",
                            ADD COLUMN IF NOT EXISTS usage_offset BIGINT;
