-- An events-topic message holds one ingest request's events (lib/events.ts): a row's Kafka
-- position is its message's offset plus its index in the message, which the sink's replay check
-- compares. Rows written before this column were one event per message: index 0.
ALTER TABLE {db}.events ADD COLUMN kafka_index UInt32 DEFAULT 0 AFTER kafka_offset;
