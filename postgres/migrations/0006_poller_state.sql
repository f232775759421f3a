-- The pollers' state per integration (pipeline/pollers, docs/connectors/polling.md): which pipeline
-- instance owns its polling (a lease renewed by the owner, taken over once it lapses), how far the
-- vendor's data was brought in (cursor: written after the events were published, only by the
-- owner), and how the last polls went (health of the link, backoff across owners).
CREATE TABLE poller_state (
  integration_id  uuid PRIMARY KEY REFERENCES integrations (id),
  owner           text,
  lease_until     timestamptz,
  cursor          jsonb,
  last_ok_at      timestamptz,
  last_error_at   timestamptz,
  last_error      text,
  failures        integer NOT NULL DEFAULT 0,
  updated_at      timestamptz NOT NULL DEFAULT now()
);
