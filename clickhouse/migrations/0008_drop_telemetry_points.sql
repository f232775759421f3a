-- The per-(event, metric) points table and its view go. No query reads them: the spec serves
-- intervals up to a minute from the minute rollup, and every point is still in `events`
-- (metric_names / metric_values). Yet each insert into `events` paid for them: an ARRAY JOIN row
-- per metric, one more part to create, and merges of the second-largest table
-- (benchmarks/README.md, bench:ingest, fifth session). The view goes first, so no insert can
-- reach a dropped table; both steps can be re-run.
DROP TABLE IF EXISTS {db}.telemetry_points_mv;

DROP TABLE IF EXISTS {db}.telemetry_points;
