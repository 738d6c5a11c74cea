-- Ingest back near the floor (issue 32): an index of the fork copies (DESIGN §2.1), which are
-- few, so that a batch finds the copies among its own lines through a few index entries per
-- file (reown_requests) instead of a lookup for every line it holds.
CREATE INDEX line_holders_copies ON retrod.line_holders (file_id, "offset") WHERE copy;
