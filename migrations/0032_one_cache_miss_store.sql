-- One store of prompt-cache misses (issue 32): `retrod trends` and the web UI's session list read
-- the misses migration 0031 keeps at commit (`cache_misses`), joined to their requests for the
-- machine, with the price tier and the UTC day worked out when read. The second store of
-- migration 0029 goes: its rows, the marks that asked for a walk, and the triggers that set them
-- on every write of a request or a compaction boundary (the daemon's 10-second walk went with
-- report/cache_rollup.py).
DROP TRIGGER requests_stale_inserted ON retrod.requests;
DROP TRIGGER requests_stale_updated ON retrod.requests;
DROP TRIGGER requests_stale_deleted ON retrod.requests;
DROP TRIGGER boundaries_stale_inserted ON retrod.cache_boundaries;
DROP TRIGGER boundaries_stale_deleted ON retrod.cache_boundaries;
DROP FUNCTION retrod.mark_cache_stale();
DROP TABLE retrod.cache_stale;
DROP TABLE retrod.cache_miss_rollup;
