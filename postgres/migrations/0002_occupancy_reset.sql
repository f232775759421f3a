-- The venue-local hour at which the live occupancy count starts again from 0 each day (docs/processors.md).
ALTER TABLE venues ADD COLUMN occupancy_reset_hour smallint NOT NULL DEFAULT 4 CHECK (occupancy_reset_hour BETWEEN 0 AND 23);
