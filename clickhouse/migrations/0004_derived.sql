-- Streams derived by the processors (pipeline/processors/, docs/processors.md), written by the
-- output sinks like raw events: kafka_* columns make replays skip stored rows, retention_days and
-- the partition key let the retention job drop whole partitions.

-- Occupancy figures of venues (zone_id '') and area/counter zones, one row per change.
CREATE TABLE IF NOT EXISTS {db}.occupancy_updates (
  operator_id     UUID,
  venue_id        UUID,
  zone_id         String,
  ts              DateTime('UTC'),
  ts_ms           UInt16,
  local_day       Date,
  value           Float64,
  capacity        Nullable(Float64),
  percent         Nullable(Float64),
  reason          String,
  clamped         UInt32,
  retention_days  UInt16,
  kafka_topic     String,
  kafka_partition UInt32,
  kafka_offset    UInt64
) ENGINE = MergeTree
PARTITION BY (retention_days, toYYYYMMDD(ts))
ORDER BY (operator_id, venue_id, zone_id, ts);

-- Closed visits (ts = start); dwell = ended_at - ts.
CREATE TABLE IF NOT EXISTS {db}.visits (
  visit_id        UUID,
  operator_id     UUID,
  venue_id        UUID,
  zone_id         String,
  device          String,
  randomized_mac  UInt8,
  ts              DateTime('UTC'),
  ts_ms           UInt16,
  ended_at        DateTime('UTC'),
  dwell_seconds   UInt32,
  sightings       UInt32,
  local_day       Date,
  retention_days  UInt16,
  kafka_topic     String,
  kafka_partition UInt32,
  kafka_offset    UInt64
) ENGINE = MergeTree
PARTITION BY (retention_days, toYYYYMMDD(ts))
ORDER BY (operator_id, venue_id, zone_id, ts);

-- Loyalty rollup: (venue, venue-local day, device) of every whole-venue visit, at most one row
-- per triple once merged; scoring counts distinct days per device from here.
CREATE TABLE IF NOT EXISTS {db}.visit_days (
  operator_id     UUID,
  venue_id        UUID,
  day             Date,
  device          String,
  retention_days  UInt16,
  visits          AggregateFunction(count)
) ENGINE = AggregatingMergeTree
PARTITION BY (retention_days, if(retention_days > 90, toYYYYMM(day), toYYYYMMDD(day)))
ORDER BY (operator_id, venue_id, day, device);

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.visit_days_mv TO {db}.visit_days AS
SELECT operator_id, venue_id, local_day AS day, device, retention_days, countState() AS visits
FROM {db}.visits
WHERE zone_id = ''
GROUP BY operator_id, venue_id, day, device, retention_days;

-- Connector health: every transition, and an hourly snapshot per integration (transition = 0).
CREATE TABLE IF NOT EXISTS {db}.connector_health (
  operator_id     UUID,
  venue_id        UUID,
  integration_id  UUID,
  connector_type  String,
  status          String,
  previous        String,
  transition      UInt8,
  last_event_at   DateTime('UTC'),
  has_last_event  UInt8,
  rejection_rate  Float64,
  reason          String,
  ts              DateTime('UTC'),
  ts_ms           UInt16,
  retention_days  UInt16,
  kafka_topic     String,
  kafka_partition UInt32,
  kafka_offset    UInt64
) ENGINE = MergeTree
PARTITION BY (retention_days, toYYYYMMDD(ts))
ORDER BY (operator_id, integration_id, ts);

-- The `occupancy` telemetry key now means the derived live count (whole venue) at every
-- resolution. A connector's own count keeps flowing into it through the occupancy processor
-- (which re-baselines on it), so the raw metric is rolled up as `occupancy_reported` instead of
-- being counted twice. Rows rolled up before this migration keep their key.
DROP TABLE IF EXISTS {db}.telemetry_1m_mv;
DROP TABLE IF EXISTS {db}.telemetry_1h_mv;
DROP TABLE IF EXISTS {db}.telemetry_1d_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.telemetry_1m_mv TO {db}.telemetry_1m AS
SELECT operator_id, venue_id, key, toStartOfMinute(ts) AS bucket, retention_days,
       sumStateIf(value, key != 'devices') AS v_sum,
       countStateIf(key != 'devices') AS v_count,
       minStateIf(value, key != 'devices') AS v_min,
       maxStateIf(value, key != 'devices') AS v_max,
       uniqExactStateIf(device, key = 'devices') AS devices
FROM {db}.events
ARRAY JOIN arrayConcat(['events'], arrayMap(k -> if(k = 'occupancy', 'occupancy_reported', k), metric_names), if(device = '', emptyArrayString(), ['devices'])) AS key,
           arrayConcat([1.], metric_values, if(device = '', emptyArrayFloat64(), [0.])) AS value
GROUP BY operator_id, venue_id, key, bucket, retention_days;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.telemetry_1h_mv TO {db}.telemetry_1h AS
SELECT operator_id, venue_id, key, toStartOfHour(ts) AS bucket, retention_days,
       sumStateIf(value, key != 'devices') AS v_sum,
       countStateIf(key != 'devices') AS v_count,
       minStateIf(value, key != 'devices') AS v_min,
       maxStateIf(value, key != 'devices') AS v_max,
       uniqExactStateIf(device, key = 'devices') AS devices
FROM {db}.events
ARRAY JOIN arrayConcat(['events'], arrayMap(k -> if(k = 'occupancy', 'occupancy_reported', k), metric_names), if(device = '', emptyArrayString(), ['devices'])) AS key,
           arrayConcat([1.], metric_values, if(device = '', emptyArrayFloat64(), [0.])) AS value
GROUP BY operator_id, venue_id, key, bucket, retention_days;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.telemetry_1d_mv TO {db}.telemetry_1d AS
SELECT operator_id, venue_id, key, local_day AS day, retention_days,
       sumStateIf(value, key != 'devices') AS v_sum,
       countStateIf(key != 'devices') AS v_count,
       minStateIf(value, key != 'devices') AS v_min,
       maxStateIf(value, key != 'devices') AS v_max,
       uniqExactStateIf(device, key = 'devices') AS devices
FROM {db}.events
ARRAY JOIN arrayConcat(['events'], arrayMap(k -> if(k = 'occupancy', 'occupancy_reported', k), metric_names), if(device = '', emptyArrayString(), ['devices'])) AS key,
           arrayConcat([1.], metric_values, if(device = '', emptyArrayFloat64(), [0.])) AS value
GROUP BY operator_id, venue_id, key, day, retention_days;

-- Whole-venue occupancy updates feed the `occupancy` key of every rollup.
CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.occupancy_1m_mv TO {db}.telemetry_1m AS
SELECT operator_id, venue_id, 'occupancy' AS key, toStartOfMinute(ts) AS bucket, retention_days,
       sumState(value) AS v_sum, countState() AS v_count, minState(value) AS v_min, maxState(value) AS v_max,
       uniqExactStateIf(zone_id, zone_id != zone_id) AS devices
FROM {db}.occupancy_updates
WHERE zone_id = ''
GROUP BY operator_id, venue_id, key, bucket, retention_days;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.occupancy_1h_mv TO {db}.telemetry_1h AS
SELECT operator_id, venue_id, 'occupancy' AS key, toStartOfHour(ts) AS bucket, retention_days,
       sumState(value) AS v_sum, countState() AS v_count, minState(value) AS v_min, maxState(value) AS v_max,
       uniqExactStateIf(zone_id, zone_id != zone_id) AS devices
FROM {db}.occupancy_updates
WHERE zone_id = ''
GROUP BY operator_id, venue_id, key, bucket, retention_days;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.occupancy_1d_mv TO {db}.telemetry_1d AS
SELECT operator_id, venue_id, 'occupancy' AS key, local_day AS day, retention_days,
       sumState(value) AS v_sum, countState() AS v_count, minState(value) AS v_min, maxState(value) AS v_max,
       uniqExactStateIf(zone_id, zone_id != zone_id) AS devices
FROM {db}.occupancy_updates
WHERE zone_id = ''
GROUP BY operator_id, venue_id, key, day, retention_days;
