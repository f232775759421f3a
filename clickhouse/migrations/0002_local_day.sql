-- The venue-local calendar day of each event, written by the sink from the venue's time zone.
-- ClickHouse takes a time zone only as a constant argument, so a per-venue zone cannot be applied
-- in a materialized view; the daily rollup groups by this column instead, which makes day buckets
-- start at local midnight (DST included). Rows written before this column existed read as the UTC day.
ALTER TABLE {db}.events ADD COLUMN local_day Date DEFAULT toDate(ts) AFTER ts;
