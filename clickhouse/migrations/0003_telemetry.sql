-- Telemetry derived from the raw events table by materialized views. Every view reads the raw
-- table itself (18.16 cannot chain views). Partitions lead with retention_days so the retention
-- job drops whole partitions per retention class (18.16 has no TTL).
--
-- Keys: each metric name of the event (occupancy, temperature, co2, humidity, noise, entries,
-- exits, amount); `devices` (distinct device pseudonyms, one row per event that names a device);
-- `events` (one per event, value 1: the dashboard's event counts; not a public telemetry key).

-- Numeric points: one row per (event, metric).
CREATE TABLE IF NOT EXISTS {db}.telemetry_points (
  operator_id     UUID,
  venue_id        UUID,
  zone_id         String,
  key             String,
  ts              DateTime('UTC'),
  ts_ms           UInt16,
  value           Float64,
  event_id        UUID,
  retention_days  UInt16
) ENGINE = MergeTree
PARTITION BY (retention_days, toYYYYMMDD(ts))
ORDER BY (operator_id, venue_id, key, ts);

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.telemetry_points_mv TO {db}.telemetry_points AS
SELECT operator_id, venue_id, zone_id, key, ts, ts_ms, value, event_id, retention_days
FROM {db}.events
ARRAY JOIN metric_names AS key, metric_values AS value;

-- Rollups: sum, count, min, max of the numeric keys and the exact distinct devices, per
-- (operator, venue, key, bucket). uniqExact keeps a 128-bit hash per device: larger than uniq's
-- sketch, but exact and identical on every ClickHouse version. AVG = sum / count at query time.
CREATE TABLE IF NOT EXISTS {db}.telemetry_1m (
  operator_id     UUID,
  venue_id        UUID,
  key             String,
  bucket          DateTime('UTC'),
  retention_days  UInt16,
  v_sum           AggregateFunction(sum, Float64),
  v_count         AggregateFunction(count),
  v_min           AggregateFunction(min, Float64),
  v_max           AggregateFunction(max, Float64),
  devices         AggregateFunction(uniqExact, String)
) ENGINE = AggregatingMergeTree
PARTITION BY (retention_days, toYYYYMMDD(bucket))
ORDER BY (operator_id, venue_id, key, bucket);

-- Hourly and daily rollups of the long retention classes are partitioned by month (fewer, larger
-- parts; dropped up to a month after the window), the short classes by day.
CREATE TABLE IF NOT EXISTS {db}.telemetry_1h (
  operator_id     UUID,
  venue_id        UUID,
  key             String,
  bucket          DateTime('UTC'),
  retention_days  UInt16,
  v_sum           AggregateFunction(sum, Float64),
  v_count         AggregateFunction(count),
  v_min           AggregateFunction(min, Float64),
  v_max           AggregateFunction(max, Float64),
  devices         AggregateFunction(uniqExact, String)
) ENGINE = AggregatingMergeTree
PARTITION BY (retention_days, if(retention_days > 90, toYYYYMM(bucket), toYYYYMMDD(bucket)))
ORDER BY (operator_id, venue_id, key, bucket);

-- Daily buckets are venue-local calendar days (events.local_day).
CREATE TABLE IF NOT EXISTS {db}.telemetry_1d (
  operator_id     UUID,
  venue_id        UUID,
  key             String,
  day             Date,
  retention_days  UInt16,
  v_sum           AggregateFunction(sum, Float64),
  v_count         AggregateFunction(count),
  v_min           AggregateFunction(min, Float64),
  v_max           AggregateFunction(max, Float64),
  devices         AggregateFunction(uniqExact, String)
) ENGINE = AggregatingMergeTree
PARTITION BY (retention_days, if(retention_days > 90, toYYYYMM(day), toYYYYMMDD(day)))
ORDER BY (operator_id, venue_id, key, day);

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.telemetry_1m_mv TO {db}.telemetry_1m AS
SELECT operator_id, venue_id, key, toStartOfMinute(ts) AS bucket, retention_days,
       sumStateIf(value, key != 'devices') AS v_sum,
       countStateIf(key != 'devices') AS v_count,
       minStateIf(value, key != 'devices') AS v_min,
       maxStateIf(value, key != 'devices') AS v_max,
       uniqExactStateIf(device, key = 'devices') AS devices
FROM {db}.events
ARRAY JOIN arrayConcat(['events'], metric_names, if(device = '', emptyArrayString(), ['devices'])) AS key,
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
ARRAY JOIN arrayConcat(['events'], metric_names, if(device = '', emptyArrayString(), ['devices'])) AS key,
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
ARRAY JOIN arrayConcat(['events'], metric_names, if(device = '', emptyArrayString(), ['devices'])) AS key,
           arrayConcat([1.], metric_values, if(device = '', emptyArrayFloat64(), [0.])) AS value
GROUP BY operator_id, venue_id, key, day, retention_days;
