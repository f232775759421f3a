-- Newest stored event per venue and connector type (events don't name their integration), for the
-- dashboard's connector lastEventAt; the events sink moves it forward only (docs/processors.md).
CREATE TABLE venue_connector_events (
  venue_id        uuid NOT NULL REFERENCES venues (id),
  connector_type  text NOT NULL,
  last_event_at   timestamptz NOT NULL,
  PRIMARY KEY (venue_id, connector_type)
);
