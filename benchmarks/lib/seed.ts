import { chsql, raw, type ChSql } from '../../clickhouse/client.js';

/** A venue to fill with telemetry straight in ClickHouse (ids from the real API). */
export interface SeedVenue {
  id: string;
  operatorId: string;
  timezone: string;
  /** Peak occupancy, which scales the occupancy readings. */
  capacity: number;
  retentionDays: number;
  zones: { hall: string; entrance: string };
}

/**
 * Raw rows as the sink writes them (pipeline/sink/rows.ts), for bench:query and bench:fairness:
 * n in [off, off + len) of the venue's `total` events spread evenly over [startSec, startSec +
 * spanSec). Per ten events: three Verkada environment readings (temperature, humidity, co2, noise),
 * one Density occupancy, two entries and one exit (with the count after it as occupancy), three
 * Meraki device sightings (a pseudonym, no metrics). With at least ten events a minute every
 * telemetry key has a value in every minute bucket.
 */
export function seedEventsSql(
  db: string,
  topic: string,
  v: SeedVenue,
  partition: number,
  total: number,
  off: number,
  len: number,
  startSec: number,
  spanSec: number,
): ChSql {
  return chsql`
    INSERT INTO ${raw(db)}.events (event_id, operator_id, venue_id, zone_id, connector_type, event_type, ts, local_day, ts_ms, received_at,
                                   device, randomized_mac, metric_names, metric_values, payload, retention_days, kafka_topic, kafka_partition, kafka_offset)
    SELECT generateUUIDv4(), toUUID(${v.operatorId}), toUUID(${v.id}),
           multiIf(kind IN ('entry', 'exit'), ${v.zones.entrance}, kind = 'device_seen', '', ${v.zones.hall}),
           multiIf(kind = 'environment', 'verkada', kind = 'device_seen', 'meraki', 'density'),
           kind, ts, toDate(ts, ${v.timezone}), toUInt16(n * 7919 % 1000), ts + 1 + n % 3,
           device, toUInt8(device != '' AND dev % 3 = 0),
           multiIf(kind = 'environment', ['temperature', 'humidity', 'co2', 'noise'], kind = 'occupancy', ['occupancy'],
                   kind = 'entry', ['entries', 'occupancy'], kind = 'exit', ['exits', 'occupancy'], emptyArrayString()),
           multiIf(kind = 'environment', [temperature, humidity, co2, noise], kind = 'occupancy', [occupancy],
                   kind IN ('entry', 'exit'), [1., occupancy], emptyArrayFloat64()),
           multiIf(kind = 'environment', concat('{"device_id":"sv11_', toString(n % 6), '","temperature":', toString(temperature),
                                                ',"humidity":', toString(humidity), ',"co2":', toString(co2), ',"noise":', toString(noise), '}'),
                   kind = 'occupancy', concat('{"space_id":"spc_1","update_type":"live","occupancy":', toString(occupancy), '}'),
                   kind = 'entry', concat('{"space_id":"spc_1","doorway_id":"drw_1","direction":1,"count":', toString(occupancy), '}'),
                   kind = 'exit', concat('{"space_id":"spc_1","doorway_id":"drw_1","direction":-1,"count":', toString(occupancy), '}'),
                   concat('{"clientMac":"', device, '","apMac":"00:18:0a:13:dd:b0","ssid":"Guest WiFi","rssi":', toString(20 + n % 50),
                          ',"os":"iOS","manufacturer":"Apple","radio":"WiFi"}')),
           ${v.retentionDays}, ${topic}, ${partition}, n
      FROM (
        SELECT n, ts,
               arrayElement(['environment', 'environment', 'environment', 'occupancy', 'entry', 'entry', 'exit',
                             'device_seen', 'device_seen', 'device_seen'], n % 10 + 1) AS kind,
               (intHash32(n) % 1000) / 1000 AS jitter,
               (toHour(ts, ${v.timezone}) * 60 + toMinute(ts, ${v.timezone})) / 1440 AS day_fraction,
               if(day_fraction >= 0.375, sin(pi() * (day_fraction - 0.375) / 0.625), 0) AS busy,
               round(20 + 3 * busy + jitter - 0.5, 1) AS temperature,
               round(38 + 10 * busy + 4 * jitter, 1) AS humidity,
               round(420 + 900 * busy + 50 * jitter) AS co2,
               round(35 + 40 * busy + 5 * jitter, 1) AS noise,
               round(${v.capacity} * busy * (0.85 + 0.3 * jitter)) AS occupancy,
               intHash32(n * 31 + 7) % 20000 AS dev,
               if(kind = 'device_seen', lower(hex(MD5(concat(${v.id}, ':', toString(dev))))), '') AS device
          FROM (SELECT number + ${off} AS n, toDateTime(${startSec} + intDiv((number + ${off}) * ${spanSec}, ${total}), 'UTC') AS ts
                  FROM numbers(${len}))
      )`;
}

/**
 * The `occupancy` key is served from the occupancy processor's updates, not from the events'
 * readings: one whole-venue update per counting event, the figure it carries, as the processor
 * writes them (the same as bench:query).
 */
export function seedOccupancyUpdatesSql(db: string, v: SeedVenue): ChSql {
  return chsql`
    INSERT INTO ${raw(db)}.occupancy_updates (operator_id, venue_id, zone_id, ts, ts_ms, local_day, value, capacity, percent, reason, clamped,
                                              retention_days, kafka_topic, kafka_partition, kafka_offset)
    SELECT operator_id, venue_id, '', ts, ts_ms, local_day, metric_values[indexOf(metric_names, 'occupancy')], NULL, NULL,
           if(event_type = 'occupancy', 'count', 'flow'), 0, retention_days, kafka_topic, kafka_partition, kafka_offset
      FROM ${raw(db)}.events
     WHERE operator_id = toUUID(${v.operatorId}) AND venue_id = toUUID(${v.id}) AND has(metric_names, 'occupancy')`;
}
