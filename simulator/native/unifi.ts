import type { GeneratedEvent } from '../traffic/index.js';
import type { TranslateContext, Translated, UnifiRecord } from './types.js';

/**
 * UniFi: the poller pulls `stat/sta` from the controller, so each `device_seen` becomes a client
 * record the fake controller serves (`mac`, `ap_mac`, `essid`, `rssi`, `first_seen`, `last_seen`,
 * `is_guest`; no `hostname`, as for a phone that sends none). Disconnects are controller events
 * (`EVT_WU_Disconnected`), not part of `stat/sta`: they stay on /ingest with the heartbeats.
 */
export function unifiTranslate(events: GeneratedEvent[], _ctx: TranslateContext): Translated {
  const records: UnifiRecord[] = [];
  const ingest: GeneratedEvent[] = [];
  for (const e of events) {
    if (e.malformed || e.event.type !== 'device_seen') {
      ingest.push(e);
      continue;
    }
    const p = e.event.payload;
    records.push({
      mac: String(p.mac),
      ap_mac: String(p.ap_mac),
      essid: String(p.essid),
      rssi: Number(p.rssi),
      first_seen: Number(p.first_seen),
      last_seen: Number(p.last_seen),
      is_guest: p.is_guest === true,
    });
  }
  return { deliveries: [], ingest, records };
}
