import { validation } from '../../lib/errors.js';
import type { Db } from '../../postgres/client.js';
import { deleteVenueAlarmRule, upsertVenueAlarmRule, venueAlarmRule } from '../../postgres/queries/alarms.js';
import { ownedVenue } from '../venues/access.js';
import { DEFAULT_OCCUPANCY_RULE, settingsOf, settingsProblems, type OccupancySettings } from './rules.js';

/** A venue's alarm rules: its override of the zone occupancy rule, or the defaults (docs/alarms.md). */
export interface VenueAlarmRules {
  venue_id: string;
  zone_occupancy: OccupancySettings;
  /** True when the venue has no override. */
  is_default: boolean;
  updated_at: string | null;
}

const DEFAULTS = settingsOf(DEFAULT_OCCUPANCY_RULE);

export async function getVenueAlarmRules(db: Db, operatorId: string, venueId: string): Promise<VenueAlarmRules> {
  await ownedVenue(db, operatorId, venueId);
  const row = await venueAlarmRule(db, venueId);
  return {
    venue_id: venueId,
    zone_occupancy: row ? (row.occupancy as OccupancySettings) : DEFAULTS,
    is_default: !row,
    updated_at: row?.updated_at.toISOString() ?? null,
  };
}

/** Changes any subset of the settings (the rest kept as they are); the whole must stay ordered. */
export async function setVenueAlarmRules(
  db: Db,
  operatorId: string,
  venueId: string,
  patch: { zone_occupancy: Partial<OccupancySettings> },
): Promise<VenueAlarmRules> {
  const current = await getVenueAlarmRules(db, operatorId, venueId);
  const next = {
    ...current.zone_occupancy,
    ...Object.fromEntries(Object.entries(patch.zone_occupancy).filter(([, v]) => v !== undefined)),
  };
  const problems = settingsProblems(next);
  if (problems.length > 0)
    throw validation('the occupancy rule must keep warning < major < critical and a hysteresis below warning', problems);
  const { updated_at } = await upsertVenueAlarmRule(db, venueId, next);
  return { venue_id: venueId, zone_occupancy: next, is_default: false, updated_at: updated_at.toISOString() };
}

export async function resetVenueAlarmRules(db: Db, operatorId: string, venueId: string): Promise<VenueAlarmRules> {
  await ownedVenue(db, operatorId, venueId);
  await deleteVenueAlarmRule(db, venueId);
  return { venue_id: venueId, zone_occupancy: DEFAULTS, is_default: true, updated_at: null };
}
