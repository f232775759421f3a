/**
 * What makes a visit (docs/processors.md#visits): a device's sightings in one scope (the whole
 * venue, or a zone) within one reset period, with no gap longer than VISIT_GAP_MS and no
 * `device_left` in between. It counts when it has MIN_SIGHTINGS sightings and lasts MIN_DWELL_MS.
 */

/** Cloud4Wi's default, within the 10–20 minutes Cisco Spaces and Meraki-style analytics use. */
export const VISIT_GAP_MS = 15 * 60_000;
/** Analytics4WiFi's and Cloud4Wi's minimum: shorter visits are passers-by. */
export const MIN_DWELL_MS = 2 * 60_000;
export const MIN_SIGHTINGS = 2;

/**
 * The longest a run of sightings can last without making a visit: shorter than MIN_DWELL_MS, or
 * fewer than MIN_SIGHTINGS sightings, each within VISIT_GAP_MS of the last. Such runs are not
 * stored, so the derive job bounds by this where one may start (pipeline/derive/visits.ts).
 */
export const MAX_UNQUALIFIED_SPAN_MS = Math.max(MIN_DWELL_MS, Math.max(0, MIN_SIGHTINGS - 2) * VISIT_GAP_MS);
