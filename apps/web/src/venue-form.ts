// The venue form's fields and request body, shared by creating a venue (#/setup) and editing one
// (#/venues/<id>/setup).

import { h } from './dom.js';
import { numOrNull, type Field } from './forms.js';
import { BROWSER_TZ } from './format.js';
import type { VenueDetail } from './api.js';

const HARDWARE = ['meraki', 'aruba', 'unifi', 'mywifi', 'square', 'density', 'verkada', 'other'];
/** '' → null (clears an optional field on update). */
const textOrNull = (s: string | undefined): string | null => (s ? s : null);

export function timezoneList(): HTMLDataListElement {
  const zones = (Intl as unknown as { supportedValuesOf?: (k: string) => string[] }).supportedValuesOf?.('timeZone') ?? [];
  return h('datalist', { id: 'timezones' }, ...zones.map((z) => h('option', { value: z })));
}

export function venueFields(v?: Partial<VenueDetail> & { occupancy_reset_hour?: number }): Field[] {
  return [
    { name: 'name', label: 'Name', required: true, value: v?.name },
    {
      name: 'timezone',
      label: 'Time zone',
      required: true,
      value: v?.timezone ?? BROWSER_TZ,
      hint: 'IANA name, e.g. Europe/Berlin: every time of the venue is shown in it.',
    },
    { name: 'address', label: 'Address', value: v?.address },
    { name: 'lat', label: 'Latitude', kind: 'number', value: v?.lat },
    { name: 'lng', label: 'Longitude', kind: 'number', value: v?.lng },
    {
      name: 'hardware_type',
      label: 'Main hardware',
      kind: 'select',
      options: [['', '—'], ...HARDWARE.map((x): [string, string] => [x, x])],
      value: v?.hardware_type ?? '',
    },
    {
      name: 'occupancy_reset_hour',
      label: 'Occupancy reset hour',
      kind: 'number',
      step: '1',
      value: v?.occupancy_reset_hour ?? 4,
      hint: 'Venue-local hour (0–23) at which live occupancy goes back to 0 while the venue is closed.',
    },
  ];
}
export const venueBody = (x: Record<string, string>, update: boolean) => {
  const body: Record<string, unknown> = { name: x.name, timezone: x.timezone };
  const addr = textOrNull(x.address);
  const hw = textOrNull(x.hardware_type);
  if (update || addr !== null) body.address = addr;
  if (update || x.lat) body.lat = numOrNull(x.lat);
  if (update || x.lng) body.lng = numOrNull(x.lng);
  if (update || hw !== null) body.hardware_type = hw;
  if (x.occupancy_reset_hour) body.occupancy_reset_hour = numOrNull(x.occupancy_reset_hour);
  return body;
};
