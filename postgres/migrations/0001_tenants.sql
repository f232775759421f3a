-- Operators (tenants), their API keys, venues, zones, integrations and monthly usage.

CREATE TABLE operators (
  id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name            text NOT NULL,
  email           text NOT NULL,
  plan            text NOT NULL DEFAULT 'free' CHECK (plan IN ('free', 'starter', 'pro', 'enterprise')),
  -- Quotas reset monthly on this instant's day of month (the billing cycle date).
  billing_anchor  timestamptz NOT NULL DEFAULT now(),
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now()
);

-- Keys are stored only as SHA-256 digests; a rotated key keeps its row with revoked_at set.
CREATE TABLE api_keys (
  id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  operator_id  uuid NOT NULL REFERENCES operators (id),
  key_hash     bytea NOT NULL UNIQUE,
  key_prefix   text NOT NULL,
  last4        text NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  revoked_at   timestamptz
);
CREATE INDEX api_keys_operator_live ON api_keys (operator_id) WHERE revoked_at IS NULL;

CREATE TABLE venues (
  id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  operator_id    uuid NOT NULL REFERENCES operators (id),
  name           text NOT NULL,
  timezone       text NOT NULL,
  address        text,
  lat            double precision CHECK (lat BETWEEN -90 AND 90),
  lng            double precision CHECK (lng BETWEEN -180 AND 180),
  hardware_type  text,
  is_active      boolean NOT NULL DEFAULT true,
  last_event_at  timestamptz,
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now(),
  deleted_at     timestamptz
);
CREATE INDEX venues_operator_active ON venues (operator_id, created_at, id) WHERE is_active;

CREATE TABLE zones (
  id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  venue_id    uuid NOT NULL REFERENCES venues (id),
  slug        text NOT NULL,
  name        text NOT NULL,
  type        text NOT NULL CHECK (type IN ('area', 'entrance', 'exit', 'counter')),
  capacity    double precision CHECK (capacity >= 0),
  is_active   boolean NOT NULL DEFAULT true,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  deleted_at  timestamptz
);
CREATE UNIQUE INDEX zones_venue_slug_live ON zones (venue_id, slug) WHERE is_active;

-- `config` holds the non-secret fields; `secrets` maps each secret field to its AES-256-GCM envelope.
CREATE TABLE integrations (
  id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  venue_id        uuid NOT NULL REFERENCES venues (id),
  connector_type  text NOT NULL CHECK (connector_type IN ('meraki', 'aruba', 'unifi', 'mywifi', 'square', 'density', 'verkada')),
  config          jsonb NOT NULL DEFAULT '{}',
  secrets         jsonb NOT NULL DEFAULT '{}',
  is_active       boolean NOT NULL DEFAULT true,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  deleted_at      timestamptz
);
CREATE INDEX integrations_venue ON integrations (venue_id) WHERE deleted_at IS NULL;

-- Monthly usage per operator and billing period.
CREATE TABLE usage_counters (
  operator_id     uuid NOT NULL REFERENCES operators (id),
  period_start    timestamptz NOT NULL,
  api_calls       bigint NOT NULL DEFAULT 0,
  mcp_queries     bigint NOT NULL DEFAULT 0,
  ingest_events   bigint NOT NULL DEFAULT 0,
  ingest_dropped  bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (operator_id, period_start)
);
