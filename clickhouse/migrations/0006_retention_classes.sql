-- The retention classes (retention_days) each operator has rows in. The rollups lead their
-- partition key with retention_days; a telemetry query that names the operator's classes
-- (`retention_days IN (SELECT … FROM retention_classes …)`) never opens the parts of the other
-- classes, which on 18.16 cost a few milliseconds even when the primary key excludes their rows.
-- Kept by the same inserts that feed the rollups, so a class is listed as soon as its rows exist
-- (a plan change moves new rows to another class; the old one stays listed). A class is never
-- removed: one whose rows have expired only costs the parts it no longer has.
CREATE TABLE IF NOT EXISTS {db}.retention_classes (
  operator_id     UUID,
  retention_days  UInt16
) ENGINE = ReplacingMergeTree
ORDER BY (operator_id, retention_days);

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.retention_classes_events_mv TO {db}.retention_classes AS
SELECT DISTINCT operator_id, retention_days FROM {db}.events;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.retention_classes_occupancy_mv TO {db}.retention_classes AS
SELECT DISTINCT operator_id, retention_days FROM {db}.occupancy_updates;

-- The rows stored before the views existed (the views above already see every insert from here on;
-- a class listed twice is merged away, and a re-run after a crash is harmless).
INSERT INTO {db}.retention_classes SELECT DISTINCT operator_id, retention_days FROM {db}.events;
INSERT INTO {db}.retention_classes SELECT DISTINCT operator_id, retention_days FROM {db}.occupancy_updates;
