import { z } from 'zod';
import { device, epochSeconds, heartbeat, label, type ConnectorEvents } from './kit.js';

/** Fields of a polled `stat/sta` client or an `EVT_WU_*` controller event. `hostname` is not accepted: personal data. */
const client = {
  /** AP MAC: infrastructure, kept as sent. */
  ap_mac: z.string().max(32).optional(),
  essid: label.optional(),
  /** dBm */
  rssi: z.number().min(-150).max(0).optional(),
  is_guest: z.boolean().optional(),
  first_seen: epochSeconds.optional(),
  last_seen: epochSeconds.optional(),
};

/**
 * Ubiquiti UniFi: the connector polls the controller (only associated clients are visible) or
 * relays its wireless-user events; `EVT_WU_Disconnected` becomes `device_left`.
 */
export const unifi: ConnectorEvents = {
  device_seen: device(
    { mac: 'mac' },
    { ...client, key: z.enum(['EVT_WU_Connected', 'EVT_WU_Roam']).optional() },
    {
      mac: 'a4:83:e7:5d:10:9f',
      ap_mac: 'f0:9f:c2:aa:bb:01',
      essid: 'Venue Guest',
      rssi: -58,
      is_guest: true,
      key: 'EVT_WU_Connected',
      zone: 'bar',
    },
  ),
  device_left: device(
    { mac: 'mac' },
    { ...client, key: z.literal('EVT_WU_Disconnected').optional() },
    { mac: 'a4:83:e7:5d:10:9f', ap_mac: 'f0:9f:c2:aa:bb:01', key: 'EVT_WU_Disconnected' },
  ),
  heartbeat: heartbeat(),
};
