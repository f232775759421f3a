-- Where each device's run of sightings stood at its venue period's checkpoint (the derive job,
-- docs/processors.md#derived-from-the-raw-table): start, last sighting, whether that was a
-- `device_left`, and its count, per scope ('' = the whole venue, or a zone) and device. A round
-- whose new sightings all come at or after the checkpoint continues every run from here and reads
-- only the sightings since, not each visit from its start: a device present all day no longer
-- makes every round read its whole day. The row of device '' is the period's checkpoint itself
-- (cp_ms), written last in the same insert as the rows it covers; a state row newer than it was
-- left by an interrupted round, and the period is then recomputed from its start.
CREATE TABLE IF NOT EXISTS {db}.derived_visit_state (
  operator_id     UUID,
  venue_id        UUID,
  day             Date,
  zone_id         String,
  device          String,
  cp_ms           UInt64,
  start_ms        UInt64,
  last_ms         UInt64,
  departed        UInt8,
  sightings       UInt32,
  randomized_mac  UInt8,
  retention_days  UInt16,
  version         UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY (retention_days, toYYYYMMDD(day))
ORDER BY (operator_id, venue_id, day, zone_id, device);
