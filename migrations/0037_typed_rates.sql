-- The price groups' rates a statement is given (report/rates.py's spans: a model, speed and tier,
-- its days, both included, and its USD per million tokens of each kind, per part and per web
-- search; null: no price known), typed once for every statement that sums tokens × rates
-- (trends_figures, ui_sessions, ui_timeline_minutes), where each pasted the same column list.
-- Numeric, as the JSON's decimal text: exact; a statement that sums in doubles casts them (a
-- numeric made a double is the double its text reads as). A single SELECT in SQL, STABLE and not
-- STRICT: the planner inlines it, so a statement is planned as when it held the text itself.
CREATE FUNCTION retrod.typed_rates(rates json)
    RETURNS TABLE (model text, fast boolean, tier_floor bigint, day_from date, day_to date,
                   input numeric, output numeric, cache_read numeric, cache_create_5m numeric,
                   cache_create_1h numeric, per_part numeric, web_search numeric)
    LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT * FROM json_to_recordset(rates)
        AS r(model text, fast boolean, tier_floor bigint, day_from date, day_to date, input numeric, output numeric,
             cache_read numeric, cache_create_5m numeric, cache_create_1h numeric, per_part numeric,
             web_search numeric)
$$;
