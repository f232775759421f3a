-- Raw accepted events, one row per canonical event. Partitioned by retention class and day so the
-- retention job can drop whole partitions (18.16 has no TTL). kafka_* columns let the sink skip
-- what a replay would insert twice.
CREATE TABLE IF NOT EXISTS {db}.events (
  event_id        UUID,
  operator_id     UUID,
  venue_id        UUID,
  zone_id         String,
  connector_type  String,
  event_type      String,
  ts              DateTime('UTC'),
  ts_ms           UInt16,
  received_at     DateTime('UTC'),
  device          String,
  randomized_mac  UInt8,
  metric_names    Array(String),
  metric_values   Array(Float64),
  payload         String,
  retention_days  UInt16,
  kafka_topic     String,
  kafka_partition UInt32,
  kafka_offset    UInt64
) ENGINE = MergeTree
PARTITION BY (retention_days, toYYYYMMDD(ts))
ORDER BY (operator_id, venue_id, ts, event_id);
