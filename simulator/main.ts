/**
 * `npm run simulate`: a fleet of venues with all seven connector types sending realistic traffic to
 * a running service. Options: `--help` and docs/simulator.md.
 */
import { parseArgs } from 'node:util';
import pretty from 'pino-pretty';
import { config, ConfigError } from '../lib/config.js';
import { createLogger } from '../lib/logger.js';
import { repoPath } from '../lib/paths.js';
import { ApiClient } from './client.js';
import { loadState, saveState, setUpFleet, type SetupPlan } from './fleet.js';
import { openBetween, silenceable, TrafficState } from './model.js';
import { hashSeed } from './random.js';
import { NativeLinks } from './native/index.js';
import { runSimulation } from './runner.js';
import { DAY } from './time.js';
import { MAX_VENUES } from './venues.js';

const HELP = `npm run simulate -- [options]

Creates (or reuses) an operator with venues in several time zones, zones and one integration of each
connector type, then sends realistic traffic to POST /ingest. Details: docs/simulator.md.

  --url URL          the service's front door (default http://127.0.0.1:8080)
  --operator NAME    operator to create or reuse (default "Simulated Venues")
  --key KEY          use this operator's API key instead of creating one with ADMIN_SECRET
  --plan PLAN        plan of a new operator: pro (default, unlimited venues, 365-day retention) or starter (5 venues, 90 days)
  --venues N         venues, 1 to ${MAX_VENUES} (default 4: Berlin, New York, Tokyo, Sydney, with all seven connectors)
  --state FILE       state file (default .stack/simulator/<operator>.json); keeps the key and what was sent
  --backfill SPAN    write this much history first, e.g. 28d or 12h (never re-sends what a run already sent)
  --duration SPAN    stop the live traffic after SPAN (e.g. 30m, 2h); default: run until Ctrl-C
  --no-live          stop after the set-up and the backfill
  --rate X           scale the live traffic (visitors per day from today on; default 1)
  --scale X          scale the whole fleet's visitor numbers (default 1)
  --seed N           seed of the traffic model (default 1): the same seed gives the same events
  --faults           add faults: a connector going silent, malformed events, a zone over capacity
  --native           send as the vendors do: Meraki, Square, Density and Verkada webhooks to /hooks/<id>
                     (signed), UniFi served by a fake controller the pipeline's poller polls; Aruba,
                     MyWiFi and what has no vendor form stay on /ingest (docs/simulator.md, "Native mode")
  --setup-only       create or find the fleet, print it, and exit
  -h, --help         this text
`;

function fail(message: string): never {
  process.stderr.write(`simulate: ${message}\n(npm run simulate -- --help)\n`);
  process.exit(2);
}

const OPTIONS = {
  url: { type: 'string', default: 'http://127.0.0.1:8080' },
  operator: { type: 'string', default: 'Simulated Venues' },
  key: { type: 'string' },
  plan: { type: 'string', default: 'pro' },
  venues: { type: 'string', default: '4' },
  state: { type: 'string' },
  backfill: { type: 'string' },
  duration: { type: 'string' },
  'no-live': { type: 'boolean', default: false },
  rate: { type: 'string', default: '1' },
  scale: { type: 'string', default: '1' },
  seed: { type: 'string', default: '1' },
  faults: { type: 'boolean', default: false },
  native: { type: 'boolean', default: false },
  'setup-only': { type: 'boolean', default: false },
  'log-level': { type: 'string', default: 'info' },
  help: { type: 'boolean', short: 'h', default: false },
} as const;

function cli() {
  try {
    return parseArgs({ options: OPTIONS }).values;
  } catch (err) {
    fail((err as Error).message);
  }
}
const args = cli();

/** `28d`, `12h`, `30m`, `45s` in ms. */
function span(name: string, value: string): number {
  const m = /^(\d+(?:\.\d+)?)([dhms])$/.exec(value.trim());
  if (!m) fail(`--${name} must be a number followed by d, h, m or s (e.g. 7d, 12h), not "${value}"`);
  return Number(m[1]) * { d: DAY, h: 3_600_000, m: 60_000, s: 1000 }[m[2] as 'd' | 'h' | 'm' | 's'];
}

function positive(name: string, value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) fail(`--${name} must be a positive number, not "${value}"`);
  return n;
}

if (args.help) {
  process.stdout.write(HELP);
  process.exit(0);
}
if (args.plan !== 'pro' && args.plan !== 'starter') fail('--plan must be pro or starter (the Free plan allows one venue)');
const plan = args.plan as SetupPlan;
const venueCount = Number(args.venues);
if (!Number.isInteger(venueCount) || venueCount < 1 || venueCount > MAX_VENUES) fail(`--venues must be an integer from 1 to ${MAX_VENUES}`);
if (plan === 'starter' && venueCount > 5) fail('the starter plan allows 5 venues; use --plan pro for more');
const retentionDays = plan === 'pro' ? 365 : 90;
const backfill = args.backfill === undefined ? undefined : span('backfill', args.backfill);
if (backfill !== undefined && backfill > (retentionDays - 1) * DAY)
  fail(`--backfill can reach back ${retentionDays - 1} days at most on the ${plan} plan (older events are past its retention)`);
const duration = args.duration === undefined ? undefined : span('duration', args.duration);
const rate = positive('rate', args.rate);
const scale = positive('scale', args.scale);
const seed = /^\d+$/.test(args.seed) ? Number(args.seed) >>> 0 : hashSeed(args.seed);
let url: string;
try {
  url = new URL(args.url).toString().replace(/\/$/, '');
} catch {
  fail(`--url must be a URL such as http://127.0.0.1:8080, not "${args.url}"`);
}
const slug =
  args.operator
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '') || 'operator';
const statePath = args.state ?? repoPath('.stack', 'simulator', `${slug}.json`);

const log = createLogger(
  'simulator',
  args['log-level'],
  process.stdout.isTTY ? pretty({ colorize: true, ignore: 'pid,hostname,service,name', translateTime: 'SYS:HH:MM:ss' }) : undefined,
);

let stopRequested = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (stopRequested) {
      log.warn('second stop request: quitting now; the batch in flight may be resent by the next run');
      process.exit(130);
    }
    stopRequested = true;
    log.info(`${signal}: stopping after the batch in flight (again to quit at once)`);
  });
}

function adminSecret(): string {
  try {
    return config().ADMIN_SECRET;
  } catch (err) {
    if (err instanceof ConfigError)
      fail(`creating an operator needs ADMIN_SECRET (in .env after npm run up, or the environment), or pass --key:\n${err.message}`);
    throw err;
  }
}

/**
 * Listed by `node scripts/stack.mjs status` beside the service processes while it runs, with its
 * fake UniFi controller's port in native mode (scripts/stack/common.mjs is plain ESM, loaded at run time).
 */
async function registerSimulator(port: number | undefined): Promise<void> {
  type Registry = {
    registerProcess(name: string, info: { pid: number; port?: number }): void;
    unregisterProcess(name: string, pid?: number): void;
  };
  const registry = (await import(repoPath('scripts', 'stack', 'common.mjs'))) as Registry;
  registry.registerProcess('simulator', { pid: process.pid, ...(port ? { port } : {}) });
  process.on('exit', () => registry.unregisterProcess('simulator', process.pid));
}

const client = new ApiClient({ url, log, stopping: () => stopRequested });
try {
  const previous = loadState(statePath);
  if (previous && previous.url !== url)
    log.warn(
      `${statePath} was written for ${previous.url}; reusing its operator at ${url} (give --state another file for a separate fleet)`,
    );
  const fleet = await setUpFleet({
    client,
    log,
    operatorName: args.operator,
    plan,
    venues: venueCount,
    adminSecret,
    key: args.key,
    state: previous,
    native: args.native,
  });
  saveState(statePath, fleet.state);
  const { created } = fleet;
  log.info(
    `operator "${fleet.state.operator.name}" ${created.operator ? 'created' : 'reused'}; ${fleet.venues.length} venues (${created.venues} new), ${created.zones} zones and ${created.integrations} integrations added; state in ${statePath}`,
  );
  for (const v of fleet.venues) log.info(`  ${v.name} (${v.timezone}) ${v.id}: ${v.connectors.join(', ')}`);
  if (args['setup-only']) process.exit(0);

  const start = Date.now();
  const live = !args['no-live'];
  const traffic = new TrafficState({ seed, scale, faults: args.faults, ...(live ? { liveFrom: start, liveRate: rate } : {}) });
  if (args.faults && live) {
    // A demo should show its faults within minutes: over capacity where a venue is open now, silence in another.
    const open = fleet.venues.find((v) => openBetween(traffic, v, start, start + 15 * 60_000)) ?? fleet.venues[0]!;
    const other = fleet.venues.find((v) => v !== open) ?? open;
    traffic.options.anchoredFaults = { overCapacityVenue: open.key, silenceVenue: other.key };
    log.info(
      `faults: ${open.name} goes over capacity in 2 minutes for 10 minutes; ${other.name}'s ${silenceable(other)[0] ?? 'Wi-Fi'} connector goes silent in 5 minutes for 15 minutes`,
    );
  }
  let lastSave = 0;
  const state = fleet.state;
  const native = args.native
    ? await NativeLinks.start({
        client,
        log,
        venues: fleet.venues,
        url,
        certDir: repoPath('.stack', 'simulator'),
        stopping: () => stopRequested,
      })
    : undefined;
  await registerSimulator(native?.controller ? Number(new URL(native.controller.url).port) : undefined);
  const stats = await runSimulation({
    client,
    venues: fleet.venues,
    traffic,
    log,
    start,
    ...(backfill !== undefined ? { backfillFrom: start - backfill } : {}),
    sentUntil: state.sentUntil ?? {},
    live,
    ...(duration !== undefined ? { liveDurationMs: duration } : {}),
    stopping: () => stopRequested,
    ...(native ? { native } : {}),
    onProgress: (sent) => {
      state.sentUntil = sent;
      if (Date.now() - lastSave > 2000) {
        saveState(statePath, state);
        lastSave = Date.now();
      }
    },
  });
  saveState(statePath, state);
  // The poller polls once a minute, and backs off up to 5 minutes while a controller was unreachable
  // (between two runs): give it the time to fetch the last UniFi records (Ctrl-C skips the wait).
  await native?.close(6 * 60_000);
  if (native) log.info(native.describe());
  for (const r of native?.refusals ?? []) log.warn({ connector: r.connector, venue: r.venue }, `refused delivery: ${r.reason}`);
  for (const u of stats.unexpected) log.warn({ connector: u.connector, venue: u.venue }, `unexpected rejection: ${u.reason}`);
  log.info(`open ${url}/ to see the fleet (sign in with the key in ${statePath})`);
  process.exit(0);
} catch (err) {
  log.error({ err }, 'the simulator stopped on an error');
  process.exit(1);
}
