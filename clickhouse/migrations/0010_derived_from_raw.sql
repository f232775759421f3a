-- Visits and the occupancy history are derived from the raw events table, per venue and reset
-- period (the venue's business day), by the pipeline's derive job (pipeline/derive/,
-- docs/processors.md#derived-from-the-raw-table): the raw table is exact (re-deliveries stored
-- once), so the figures no longer depend on when, in which order or beside whom events arrived.
-- A recomputation writes only what changed, as new versions of rows keyed by what they are; a row
-- that no longer exists gets a version with live = 0. Readers take the newest version per key
-- (argMax), so a half-merged table answers the same as a merged one.

-- Every insert into events leaves one mark per venue it touched (event time range, insert time,
-- a random id); the derive job recomputes the periods they cover. The insert and its marks are
-- one write.
CREATE TABLE IF NOT EXISTS {db}.derive_marks (
  mark_id     UInt64,
  operator_id UUID,
  venue_id    UUID,
  min_ts      DateTime('UTC'),
  max_ts      DateTime('UTC'),
  inserted_at DateTime('UTC')
) ENGINE = MergeTree
PARTITION BY toYYYYMMDD(inserted_at)
ORDER BY (inserted_at, venue_id);

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.derive_marks_mv TO {db}.derive_marks AS
SELECT rand64() AS mark_id, operator_id, venue_id, min(ts) AS min_ts, max(ts) AS max_ts, now() AS inserted_at
FROM {db}.events
WHERE event_type IN ('device_seen', 'device_left', 'entry', 'exit', 'occupancy')
GROUP BY operator_id, venue_id;

-- How far the derive job has read the marks (one row per job name, newest version wins).
CREATE TABLE IF NOT EXISTS {db}.derive_progress (
  name     String,
  cursor   DateTime('UTC'),
  version  UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY name;

-- Visits (whole venue: zone_id '', and per zone) of a period, open or ended; only visits that
-- qualify (2 sightings, 2 minutes) are kept. closes_ms: when the visit ends unless seen again
-- (last sighting + gap, the period's end, or the device_left itself).
CREATE TABLE IF NOT EXISTS {db}.derived_visits (
  operator_id     UUID,
  venue_id        UUID,
  day             Date,
  zone_id         String,
  device          String,
  start_ms        UInt64,
  end_ms          UInt64,
  closes_ms       UInt64,
  sightings       UInt32,
  randomized_mac  UInt8,
  retention_days  UInt16,
  live            UInt8,
  version         UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY (retention_days, toYYYYMMDD(day))
ORDER BY (operator_id, venue_id, day, zone_id, device, start_ms);

-- The whole venue's occupancy after each instant of a period that changed it (the period's start
-- at 0 first): the `occupancy` telemetry key at every resolution and the predictions read this.
CREATE TABLE IF NOT EXISTS {db}.derived_occupancy (
  operator_id     UUID,
  venue_id        UUID,
  ts              DateTime('UTC'),
  ts_ms           UInt16,
  local_day       Date,
  value           Float64,
  retention_days  UInt16,
  live            UInt8,
  version         UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY (retention_days, toYYYYMMDD(ts))
ORDER BY (operator_id, venue_id, ts, ts_ms);

-- The stream-built visits, their loyalty rollup and the occupancy views on live updates are
-- replaced by the tables above (rebuilt from the raw table on the derive job's first run).
DROP TABLE IF EXISTS {db}.visit_days_mv;
DROP TABLE IF EXISTS {db}.visit_days;
DROP TABLE IF EXISTS {db}.visits;
DROP TABLE IF EXISTS {db}.occupancy_1m_mv;
DROP TABLE IF EXISTS {db}.occupancy_1h_mv;
DROP TABLE IF EXISTS {db}.occupancy_1d_mv;

-- Derived rows carry the venue's retention class as of their recomputation.
CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.retention_classes_derived_visits_mv TO {db}.retention_classes AS
SELECT DISTINCT operator_id, retention_days FROM {db}.derived_visits;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.retention_classes_derived_occupancy_mv TO {db}.retention_classes AS
SELECT DISTINCT operator_id, retention_days FROM {db}.derived_occupancy;
