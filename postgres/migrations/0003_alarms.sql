-- Alarms, the alarm rules' state and the outbox of alarm events (docs/alarms.md).

-- One row per alarm. A zone alarm has zone_id, a connector alarm integration_id; source_id is
-- whichever it is, so "one active alarm per (zone or integration, type)" is one unique index.
-- Active ⇔ cleared_at IS NULL ⇔ status ACTIVE_*; acknowledged ⇔ acknowledged_at set ⇔ status *_ACK.
CREATE TABLE alarms (
  id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  operator_id      uuid NOT NULL REFERENCES operators (id),
  venue_id         uuid NOT NULL REFERENCES venues (id),
  zone_id          uuid REFERENCES zones (id),
  integration_id   uuid REFERENCES integrations (id),
  source_id        uuid GENERATED ALWAYS AS (coalesce(zone_id, integration_id)) STORED,
  type             text NOT NULL,
  severity         text NOT NULL CHECK (severity IN ('CRITICAL', 'MAJOR', 'MINOR', 'WARNING')),
  status           text NOT NULL DEFAULT 'ACTIVE_UNACK' CHECK (status IN ('ACTIVE_UNACK', 'ACTIVE_ACK', 'CLEARED_UNACK', 'CLEARED_ACK')),
  message          text NOT NULL,
  details          jsonb NOT NULL DEFAULT '{}',
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  acknowledged_at  timestamptz,
  cleared_at       timestamptz,
  CHECK ((zone_id IS NULL) <> (integration_id IS NULL)),
  CHECK ((cleared_at IS NULL) = (status IN ('ACTIVE_UNACK', 'ACTIVE_ACK'))),
  CHECK ((acknowledged_at IS NULL) = (status IN ('ACTIVE_UNACK', 'CLEARED_UNACK')))
);
CREATE UNIQUE INDEX alarms_one_active ON alarms (source_id, type) WHERE cleared_at IS NULL;
CREATE INDEX alarms_operator_newest ON alarms (operator_id, created_at DESC, id DESC);
CREATE INDEX alarms_venue_newest ON alarms (venue_id, created_at DESC, id DESC);

-- What a rule remembers per (source, type) between inputs, so a restart (kill -9 included)
-- resumes it exactly: the alarm of the current episode (the breach it was raised for), a breach
-- waiting out its minimum duration, and the last input applied (a replayed input is skipped).
CREATE TABLE alarm_rule_state (
  source_id         uuid NOT NULL,
  type              text NOT NULL,
  episode_alarm_id  uuid REFERENCES alarms (id),
  -- The alarm to raise at pending_due_at if the breach still holds (the draft, as JSON).
  pending           jsonb,
  pending_since     timestamptz,
  pending_due_at    timestamptz,
  last_input        text,
  last_offset       bigint,
  updated_at        timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (source_id, type)
);
CREATE INDEX alarm_rule_state_due ON alarm_rule_state (pending_due_at) WHERE pending_due_at IS NOT NULL;

-- Alarm events written in the same transaction as the change they describe, published to Kafka
-- after the commit and deleted once acknowledged; leftovers (a crash, Kafka away) are relayed.
CREATE TABLE alarm_outbox (
  id          bigserial PRIMARY KEY,
  venue_id    uuid NOT NULL,
  event       jsonb NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);

-- Per-venue overrides of the zone occupancy rule (absent: the defaults of docs/alarms.md).
CREATE TABLE alarm_rules (
  venue_id    uuid PRIMARY KEY REFERENCES venues (id),
  occupancy   jsonb NOT NULL,
  updated_at  timestamptz NOT NULL DEFAULT now()
);
