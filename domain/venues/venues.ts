import type { Db } from '../../postgres/client.js';
import { transaction } from '../../postgres/client.js';
import {
  activeVenueById,
  activeVenuePage,
  countActiveVenues,
  insertVenue,
  lockOperatorPlan,
  softDeleteVenue,
  updateVenueFields,
  type CreatedVenueRow,
  type DeletedRow,
  type VenueFields,
  type VenueListRow,
  type VenueRow,
} from '../../postgres/queries/venues.js';
import { activeZones, type ZoneSummaryRow } from '../../postgres/queries/zones.js';
import { liveIntegrationSummaries, type IntegrationSummaryRow } from '../../postgres/queries/integrations.js';
import { CONNECTOR_TYPES } from '../../lib/events/vocabulary.js';
import { AppError, notFound, unauthorized } from '../../lib/errors.js';
import { PLAN_LIMITS, type Plan } from '../tenants/plans.js';
import { ownedVenue } from './access.js';

/** The connector types plus `other` for hardware we have no connector for. */
export const HARDWARE_TYPES = [...CONNECTOR_TYPES, 'other'] as const;

/**
 * The IANA name as ICU knows it (canonical names and links, e.g. `Asia/Kolkata`, `US/Eastern`),
 * or undefined. Offsets such as `+01:00` are not names. Letter case is normalised when the name is
 * canonical (`europe/berlin` → `Europe/Berlin`); a link is kept as given.
 */
export function ianaTimezone(name: string): string | undefined {
  if (!/^[A-Za-z][A-Za-z0-9_+-]*(\/[A-Za-z0-9_+-]+)*$/.test(name)) return undefined;
  try {
    const resolved = new Intl.DateTimeFormat('en-US', { timeZone: name }).resolvedOptions().timeZone;
    return resolved.toLowerCase() === name.toLowerCase() ? resolved : name;
  } catch {
    return undefined;
  }
}

export interface Page {
  limit: number;
  offset: number;
}

export interface VenuePage extends Page {
  data: VenueListRow[];
  total: number;
}

export type VenueDetail = VenueRow & {
  zones: Omit<ZoneSummaryRow, 'is_active'>[];
  integrations: IntegrationSummaryRow[];
};

export async function listVenues(db: Db, operatorId: string, page: Page): Promise<VenuePage> {
  const [data, total] = await Promise.all([activeVenuePage(db, operatorId, page.limit, page.offset), countActiveVenues(db, operatorId)]);
  return { data, total, limit: page.limit, offset: page.offset };
}

type NewVenue = Partial<VenueFields> & Pick<VenueFields, 'name' | 'timezone'>;

/**
 * Creates a venue within the plan's venue limit (active venues only). The operator row is locked
 * first, so two concurrent creations cannot both pass the count.
 */
export async function createVenue(db: Db, operatorId: string, input: NewVenue): Promise<CreatedVenueRow> {
  return transaction(db, async (tx) => {
    const plan = await lockOperatorPlan(tx, operatorId);
    if (!plan) throw unauthorized('operator no longer exists');
    const max = PLAN_LIMITS[plan].maxVenues;
    if (max !== Infinity) {
      const active = await countActiveVenues(tx, operatorId);
      if (active >= max) throw planVenueLimit(plan, max, active);
    }
    return insertVenue(tx, operatorId, { ...input, timezone: ianaTimezone(input.timezone) ?? input.timezone });
  });
}

function planVenueLimit(plan: Plan, max: number, active: number): AppError {
  const { label } = PLAN_LIMITS[plan];
  const upgrade =
    plan === 'free'
      ? 'the Team plan (plan "starter", 5 venues) or Business (plan "pro", unlimited)'
      : 'the Business plan (plan "pro", unlimited venues)';
  return new AppError(
    403,
    'PLAN_LIMIT_REACHED',
    `the ${label} plan allows at most ${max} active venue${max === 1 ? '' : 's'} and you have ${active}; ` +
      `delete a venue (DELETE /api/venues/:id) or upgrade to ${upgrade} to add more`,
    { plan, limit: max, active },
  );
}

export async function getVenue(db: Db, operatorId: string, venueId: string): Promise<VenueDetail> {
  await ownedVenue(db, operatorId, venueId);
  const [venue, zones, integrations] = await Promise.all([
    activeVenueById(db, operatorId, venueId),
    activeZones(db, venueId),
    liveIntegrationSummaries(db, venueId),
  ]);
  if (!venue) throw notFound('venue');
  return { ...venue, zones: zones.map(({ is_active: _active, ...summary }) => summary), integrations };
}

export async function updateVenue(db: Db, operatorId: string, venueId: string, patch: Partial<VenueFields>): Promise<VenueRow> {
  await ownedVenue(db, operatorId, venueId);
  const timezone = patch.timezone === undefined ? undefined : (ianaTimezone(patch.timezone) ?? patch.timezone);
  const updated = await updateVenueFields(db, operatorId, venueId, { ...patch, timezone });
  // Deleted between the ownership check and the update.
  if (!updated) throw notFound('venue');
  return updated;
}

export async function deleteVenue(db: Db, operatorId: string, venueId: string): Promise<DeletedRow> {
  await ownedVenue(db, operatorId, venueId);
  const deleted = await softDeleteVenue(db, operatorId, venueId);
  if (!deleted) throw notFound('venue');
  return deleted;
}
