-- The occupancy of each area and counter zone after each instant of a period that changed it (the
-- period's start at 0 first), derived from the raw events like the venue's (0010): the `occupancy`
-- telemetry key of one zone (`zone_id` on the telemetry endpoint) reads this. Door zones have no
-- occupancy of their own; they count for the venue.
CREATE TABLE IF NOT EXISTS {db}.derived_zone_occupancy (
  operator_id     UUID,
  venue_id        UUID,
  zone_id         String,
  ts              DateTime('UTC'),
  ts_ms           UInt16,
  local_day       Date,
  value           Float64,
  retention_days  UInt16,
  live            UInt8,
  version         UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY (retention_days, toYYYYMMDD(ts))
ORDER BY (operator_id, venue_id, zone_id, ts, ts_ms);

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.retention_classes_derived_zone_occupancy_mv TO {db}.retention_classes AS
SELECT DISTINCT operator_id, retention_days FROM {db}.derived_zone_occupancy;
