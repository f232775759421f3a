import { z } from 'zod';
import { eventType, heartbeat, id, occupancy, type ConnectorEvents } from './kit.js';

const doorway = { space_id: id.optional(), doorway_id: id.optional() };

/**
 * One Density v2 count webhook is one person through a doorway: `direction` 1 is an `entry`, -1 an
 * `exit` (it may be left out; when given it must match the type). Density's `count` is the space's
 * count after the event, so it becomes the `occupancy` metric, not a number of people crossing.
 */
const crossing = (direction: 1 | -1, metric: 'entries' | 'exits', example: Record<string, unknown>) =>
  eventType(
    {
      ...doorway,
      direction: z.literal(direction, `must be ${direction} for this event type`).optional(),
      count: z.int().min(0).optional(),
    },
    (p) => ({ metrics: p.count === undefined ? { [metric]: 1 } : { [metric]: 1, occupancy: p.count } }),
    example,
  );

/** Density: doorway counts (v2 webhook) and space occupancy (v3 stream). */
export const density: ConnectorEvents = {
  entry: crossing(1, 'entries', { space_id: 'spc_1234', doorway_id: 'drw_5678', direction: 1, count: 37, zone: 'main-entrance' }),
  exit: crossing(-1, 'exits', { space_id: 'spc_1234', doorway_id: 'drw_5678', direction: -1, count: 36, zone: 'main-entrance' }),
  occupancy: occupancy(
    {
      space_id: id.optional(),
      update_type: z.enum(['live', 'refresh']).optional(),
      counting_mode: z.string().max(64).optional(),
      space_health_status: z.string().max(64).optional(),
    },
    { space_id: 'spc_1234', update_type: 'live', occupancy: 36, zone: 'hall' },
  ),
  heartbeat: heartbeat(),
};
