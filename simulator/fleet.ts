import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Logger } from 'pino';
import type { ConnectorType } from '../lib/events/vocabulary.js';
import { ApiError, type ApiClient } from './client.js';
import { integrationConfig, VENUE_TEMPLATES, type SimVenue, type VenueTemplate } from './venues.js';

/**
 * Fleet set-up: the operator, its venues, their zones and integrations, created through the API on
 * the first run and found again on later ones (from the state file, else by name), so a second
 * run adds nothing. The state file keeps the operator's API key: it is written with mode 0600.
 */

export interface FleetState {
  version: 1;
  url: string;
  operator: { id: string | null; name: string; key: string };
  venues: Record<string, { id: string }>;
  /** Per stream (`venueKey/connector`), traffic was sent up to this instant (ms): a later run starts there, never twice. */
  sentUntil?: Record<string, number>;
}

export type SetupPlan = 'starter' | 'pro';

export interface FleetOptions {
  client: ApiClient;
  log: Logger;
  operatorName: string;
  plan: SetupPlan;
  venues: number;
  /** The admin secret, read only when an operator must be created or its key replaced. */
  adminSecret: () => string;
  /** An operator's key given on the command line (wins over the state file's). */
  key?: string;
  state?: FleetState;
  /**
   * `--native`: the service's UniFi poller is to poll the simulator's fake controller (native/ sets
   * that up). Otherwise the simulator itself sends UniFi's events to /ingest, so its UniFi
   * integrations get `polling: false` (docs/connectors/unifi.md): the pipeline must not poll the
   * made-up controller address.
   */
  native?: boolean;
}

export interface Fleet {
  state: FleetState;
  venues: SimVenue[];
  created: { operator: boolean; venues: number; zones: number; integrations: number };
}

interface Listed<T> {
  data: T[];
  total: number;
}
interface VenueRow {
  id: string;
  name: string;
  operator_id?: string;
}

export async function setUpFleet(opts: FleetOptions): Promise<Fleet> {
  const { client, log } = opts;
  const created = { operator: false, venues: 0, zones: 0, integrations: 0 };
  const previous = opts.state;
  let operator = await existingOperator(opts);
  if (!operator) {
    const email = `simulator+${Date.now().toString(36)}@example.com`;
    const res = await client.call<{ operator_id: string; api_key: string }>(
      'POST',
      '/api/operators',
      { name: opts.operatorName, email, plan: opts.plan },
      adminHeader(opts),
    );
    operator = { id: res.body.operator_id, name: opts.operatorName, key: res.body.api_key };
    created.operator = true;
    log.info({ operatorId: operator.id, plan: opts.plan }, 'operator created');
  }
  client.key = operator.key;

  const templates = VENUE_TEMPLATES.slice(0, opts.venues);
  const existing = await listAll<VenueRow>(client, '/api/venues');
  const venues: SimVenue[] = [];
  const stateVenues: FleetState['venues'] = {};
  for (const t of templates) {
    const knownId = previous?.venues[t.key]?.id;
    let row = existing.find((v) => v.id === knownId) ?? existing.find((v) => v.name === t.name);
    if (!row) {
      const res = await client.call<VenueRow>('POST', '/api/venues', {
        name: t.name,
        timezone: t.timezone,
        address: t.address,
        lat: t.lat,
        lng: t.lng,
        hardware_type: t.connectors[0],
      });
      row = res.body;
      created.venues++;
    }
    operator.id ??= row.operator_id ?? null;
    stateVenues[t.key] = { id: row.id };
    created.zones += await ensureZones(client, row.id, t);
    const { integrations, added } = await ensureIntegrations(client, row.id, t, opts.native === true);
    created.integrations += added;
    venues.push({ ...t, id: row.id, integrations });
  }
  const state: FleetState = { version: 1, url: client.url, operator, venues: { ...previous?.venues, ...stateVenues } };
  if (previous?.sentUntil !== undefined && previous.operator.key === operator.key) state.sentUntil = previous.sentUntil;
  return { state, venues, created };
}

function adminHeader(opts: FleetOptions): Record<string, string> {
  return { 'x-admin-key': opts.adminSecret() };
}

/** The operator to reuse: a key from the command line or the state file that still works (a lost one is replaced by the admin). */
async function existingOperator(opts: FleetOptions): Promise<FleetState['operator'] | undefined> {
  const { client, state, log } = opts;
  const key = opts.key ?? state?.operator.key;
  if (!key) return undefined;
  client.key = key;
  try {
    await client.call('GET', '/api/venues?limit=1');
    return { id: opts.key ? null : (state?.operator.id ?? null), name: state?.operator.name ?? opts.operatorName, key };
  } catch (err) {
    if (!(err instanceof ApiError) || err.status !== 401) throw err;
    if (opts.key) throw new Error('the API key given with --key is not accepted (unknown or rotated)');
    const id = state?.operator.id;
    if (!id) return undefined;
    log.warn({ operatorId: id }, 'the saved API key is no longer accepted; issuing a new one with the admin secret');
    try {
      const res = await client.call<{ api_key: string }>('POST', `/api/operators/${id}/rotate-key`, undefined, adminHeader(opts));
      return { id, name: state.operator.name, key: res.body.api_key };
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) {
        log.warn({ operatorId: id }, 'the saved operator no longer exists (a fresh database?); creating a new one');
        return undefined;
      }
      throw e;
    }
  }
}

async function listAll<T>(client: ApiClient, path: string): Promise<T[]> {
  const out: T[] = [];
  for (let offset = 0; ; offset += 200) {
    const res = await client.call<Listed<T>>('GET', `${path}?limit=200&offset=${offset}`);
    out.push(...res.body.data);
    if (res.body.data.length < 200 || out.length >= res.body.total) return out;
  }
}

async function ensureZones(client: ApiClient, venueId: string, t: VenueTemplate): Promise<number> {
  const res = await client.call<Listed<{ slug: string }>>('GET', `/api/venues/${venueId}/zones`);
  const have = new Set(res.body.data.map((z) => z.slug));
  let added = 0;
  for (const z of t.zones) {
    if (have.has(z.slug)) continue;
    await client.call('POST', `/api/venues/${venueId}/zones`, { slug: z.slug, name: z.name, type: z.type, capacity: z.capacity });
    added++;
  }
  return added;
}

async function ensureIntegrations(
  client: ApiClient,
  venueId: string,
  t: VenueTemplate,
  native: boolean,
): Promise<{ integrations: SimVenue['integrations']; added: number }> {
  const res = await client.call<Listed<{ id: string; connector_type: ConnectorType; is_active: boolean; config: Record<string, unknown> }>>(
    'GET',
    `/api/venues/${venueId}/integrations`,
  );
  const integrations: SimVenue['integrations'] = {};
  const configs = new Map<string, Record<string, unknown>>();
  for (const i of res.body.data.sort((a, b) => Number(b.is_active) - Number(a.is_active))) {
    integrations[i.connector_type] ??= i.id;
    configs.set(i.id, i.config);
  }
  let added = 0;
  for (const type of t.connectors) {
    const id = integrations[type];
    if (id) {
      // Sent to /ingest by the simulator: not for the service to poll (a native run had turned it on).
      const config = configs.get(id);
      if (type === 'unifi' && !native && config && config.polling !== false) {
        await client.call('PUT', `/api/venues/${venueId}/integrations/${id}`, { config: { ...config, polling: false } });
      }
      continue;
    }
    const config = { ...integrationConfig(type, t), ...(type === 'unifi' && !native ? { polling: false } : {}) };
    const made = await client.call<{ id: string }>('POST', `/api/venues/${venueId}/integrations`, { connector_type: type, config });
    integrations[type] = made.body.id;
    added++;
  }
  return { integrations, added };
}

export function loadState(path: string): FleetState | undefined {
  if (!existsSync(path)) return undefined;
  const parsed = JSON.parse(readFileSync(path, 'utf8')) as FleetState;
  if (parsed.version !== 1 || typeof parsed.operator?.key !== 'string') throw new Error(`${path} is not a simulator state file`);
  return parsed;
}

/** Written whole to a temporary file and renamed, mode 0600 (it holds an API key). */
export function saveState(path: string, state: FleetState): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(state, null, 2) + '\n', { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, path);
}
