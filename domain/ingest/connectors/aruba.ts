import { z } from 'zod';
import { device, heartbeat, label, type ConnectorEvents } from './kit.js';

/**
 * HPE Aruba ALE / Central presence and location records, one `device_seen` per record. The
 * client is named by `sta_eth_mac` or, when ALE anonymises, by `hashed_sta_eth_mac` (40 hex):
 * exactly one of them. A hashed client cannot be checked for a randomized MAC.
 */
export const aruba: ConnectorEvents = {
  device_seen: device(
    { mac: 'sta_eth_mac', hashed: 'hashed_sta_eth_mac' },
    {
      associated: z.boolean().optional(),
      ap_name: label.optional(),
      /** AP radio MAC: infrastructure, kept as sent. */
      radio_mac: z.string().max(32).optional(),
      /** dBm */
      rssi: z.number().min(-150).max(0).optional(),
      sta_location_x: z.number().optional(),
      sta_location_y: z.number().optional(),
      error_level: z.number().min(0).optional(),
      campus_id: label.optional(),
      building_id: label.optional(),
      floor_id: label.optional(),
      geofence_ids: z.array(label).max(50).optional(),
    },
    {
      sta_eth_mac: 'da:a1:19:0b:7c:2e',
      associated: false,
      ap_name: 'AP-Lobby-1',
      rssi: -67,
      sta_location_x: 12.5,
      sta_location_y: 4.25,
      zone: 'lobby',
    },
  ),
  heartbeat: heartbeat(),
};
