-- The daily rollup stops keeping device sets. Every raw insert wrote each venue's set of devices
-- into all three rollups, and merges rewrote them level by level: the largest part of ClickHouse's
-- work per event (benchmarks/README.md, bench:ingest, fifth session). `devices` by local day is now
-- answered from the hourly sets of the hours inside the day and the minute sets of an hour that
-- local midnight cuts (zones a fractional number of hours from UTC), merged at query time: the
-- same exact union (clickhouse/queries/telemetry.ts). Daily rows written before keep their sets,
-- unread, until retention drops them; new rows carry an empty set (18.16 wants every column of
-- the target from a view). The other keys are rolled up as before.
DROP TABLE IF EXISTS {db}.telemetry_1d_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.telemetry_1d_mv TO {db}.telemetry_1d AS
SELECT operator_id, venue_id, key, local_day AS day, retention_days,
       sumState(value) AS v_sum,
       countState() AS v_count,
       minState(value) AS v_min,
       maxState(value) AS v_max,
       uniqExactStateIf(device, 0) AS devices
FROM {db}.events
ARRAY JOIN arrayConcat(['events'], arrayMap(k -> if(k = 'occupancy', 'occupancy_reported', k), metric_names)) AS key,
           arrayConcat([1.], metric_values) AS value
GROUP BY operator_id, venue_id, key, day, retention_days;
