-- A derive mark says which kind of events an insert stored: 1 sightings (they change visits), 2
-- door flows (they change the occupancy history), 0 unknown (marks written before this, and the
-- sink's rollup repair): both. A round recomputes only what a venue's marks can have changed; a
-- venue with sightings only no longer costs a round its four occupancy queries, nor a door-counter
-- venue the two visits queries (half of a round's ClickHouse CPU over bench:ingest's data,
-- benchmarks/README.md, bench:derive-round). Migrations run while the sink is stopped: no insert
-- falls between the view's drop and its creation.
ALTER TABLE {db}.derive_marks ADD COLUMN kind UInt8 DEFAULT 0;

DROP TABLE IF EXISTS {db}.derive_marks_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.derive_marks_mv TO {db}.derive_marks AS
SELECT rand64() AS mark_id, operator_id, venue_id, min(ts) AS min_ts, max(ts) AS max_ts, now() AS inserted_at,
       toUInt8(if(event_type IN ('device_seen', 'device_left'), 1, 2)) AS kind
FROM {db}.events
WHERE event_type IN ('device_seen', 'device_left', 'entry', 'exit', 'occupancy')
GROUP BY operator_id, venue_id, kind;
