import { z } from 'zod';
import { device, environment, epochSeconds, heartbeat, label, type ConnectorEvents } from './kit.js';

/**
 * Cisco Meraki. A Scanning API post (v2 per AP, v3 per network) holds many observations; the
 * connector sends one `device_seen` per observation, flattened, under Meraki's field names. Client
 * IPs and `userId` are not accepted (personal data); nested `observations`/`locations` arrays are
 * dropped like every unknown field. MT sensors give `environment`.
 */
export const meraki: ConnectorEvents = {
  device_seen: device(
    { mac: 'clientMac' },
    {
      /** Access point MAC: infrastructure, not personal, kept as sent. */
      apMac: z.string().max(32).optional(),
      /** null = seen but not associated. */
      ssid: label.nullable().optional(),
      /** v2: positive SNR-like value; v3: dBm (negative), from latestRecord.nearestApRssi. */
      rssi: z.number().min(-150).max(150).optional(),
      os: label.nullable().optional(),
      manufacturer: label.nullable().optional(),
      /** v2 `type` DevicesSeen/BluetoothDevicesSeen or v3 WiFi/BLE/Bluetooth. */
      radio: z.enum(['WiFi', 'BLE', 'Bluetooth']).optional(),
      seenEpoch: epochSeconds.optional(),
      location: z
        .object({ lat: z.number().min(-90).max(90), lng: z.number().min(-180).max(180), unc: z.number().min(0).optional() })
        .optional(),
    },
    {
      clientMac: '3C:22:FB:1A:2B:3C',
      apMac: '00:18:0a:13:dd:b0',
      ssid: 'Guest WiFi',
      rssi: 47,
      os: 'iOS',
      manufacturer: 'Apple',
      radio: 'WiFi',
      zone: 'lobby',
    },
  ),
  environment: environment({ serial: label.optional() }, { serial: 'Q3CA-AB12-CD34', temperature: 21.4, humidity: 38, zone: 'lobby' }),
  heartbeat: heartbeat(),
};
