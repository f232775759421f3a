import { z } from 'zod';
import { device, heartbeat, label, type ConnectorEvents } from './kit.js';

/**
 * MyWiFi captive portal: a guest authentication is a `device_seen`. Only how the guest logged in
 * and the consent flag are kept; email, phone and social profile are not accepted (personal data).
 */
export const mywifi: ConnectorEvents = {
  device_seen: device(
    { mac: 'mac' },
    {
      ssid: label.optional(),
      login_method: z.enum(['email', 'phone', 'social', 'voucher', 'click_through']).optional(),
      consent: z.boolean().optional(),
    },
    { mac: '8C-85-90-12-34-56', ssid: 'Cafe Free WiFi', login_method: 'email', consent: true },
  ),
  heartbeat: heartbeat(),
};
