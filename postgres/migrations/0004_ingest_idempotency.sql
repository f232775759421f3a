-- Idempotency keys of POST /ingest: the first answer to (operator, key), kept for the replay window.
CREATE TABLE ingest_idempotency (
  operator_id   uuid NOT NULL REFERENCES operators (id),
  key           text NOT NULL,
  -- SHA-256 of the request body as parsed: the same key with another body is a conflict.
  body_hash     bytea NOT NULL,
  -- NULL while the first request is in flight; then its 202 answer.
  response      jsonb,
  created_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (operator_id, key)
);
CREATE INDEX ingest_idempotency_age ON ingest_idempotency (operator_id, created_at);
