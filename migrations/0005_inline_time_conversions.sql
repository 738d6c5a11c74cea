-- us_to_ts and ts_to_us were declared IMMUTABLE, but their bodies use timestamptz arithmetic,
-- which PostgreSQL classes STABLE (it can depend on TimeZone). A SQL function whose body is
-- more volatile than its declaration is never inlined: every call went through the SQL-function
-- executor, ~1.5 µs instead of ~0.2 µs, on every timestamp of every row ingested (about a tenth
-- of the database's backfill time). Declared STABLE, as their bodies are, they are inlined. No
-- index or generated column uses them, which is what IMMUTABLE would be needed for.
ALTER FUNCTION retrod.us_to_ts(BIGINT) STABLE;
ALTER FUNCTION retrod.ts_to_us(TIMESTAMPTZ) STABLE;
