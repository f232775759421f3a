import { z } from 'zod';
import { crossing, environment, epochSeconds, heartbeat, id, occupancy, type ConnectorEvents } from './kit.js';

/** A people-counting line of a camera; trend buckets `[bucket_start, bucket_end, count]` become one event each. */
const line = {
  camera_id: id.optional(),
  line_id: id.optional(),
  bucket_start: epochSeconds.optional(),
  bucket_end: epochSeconds.optional(),
};

/**
 * Verkada: people-counting trends (`trend_in` → `entry`, `trend_out` → `exit`, with `count` people
 * per bucket), camera occupancy, and environmental sensor readings (SV sensors).
 */
export const verkada: ConnectorEvents = {
  entry: crossing('entries', line, {
    camera_id: 'cam_7a1b',
    line_id: 'front-door',
    count: 12,
    bucket_start: 1748772000,
    bucket_end: 1748772900,
    zone: 'main-entrance',
  }),
  exit: crossing('exits', line, { camera_id: 'cam_7a1b', line_id: 'front-door', count: 9, zone: 'main-entrance' }),
  occupancy: occupancy({ camera_id: id.optional() }, { camera_id: 'cam_7a1b', occupancy: 41, zone: 'hall' }),
  environment: environment(
    { device_id: id.optional(), pm2_5: z.number().min(0).optional(), tvoc: z.number().min(0).optional() },
    { device_id: 'sv11_2c3d', temperature: 22.8, humidity: 41, co2: 612, noise: 58.5, pm2_5: 4.1, zone: 'hall' },
  ),
  heartbeat: heartbeat(),
};
