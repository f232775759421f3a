import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { BrowserContext } from 'playwright-core';
import type { Config } from '../../lib/config.js';
import { derivedTopicNames } from '../../lib/events.js';
import { createLogger } from '../../lib/logger.js';
import { repoPath } from '../../lib/paths.js';
import { runAlarmRules, type RunningAlarmRules } from '../../pipeline/alarms/alarm-rules.js';
import { runProcessors, type RunningProcessors } from '../../pipeline/processors/run.js';
import { runEventsSink, type RunningEventsSink } from '../../pipeline/sink/events-sink.js';
import { launchChromium } from '../../scripts/lib/chromium.mjs';
import { ensureWebBuild } from '../../scripts/lib/web.mjs';
import { startTestEdge } from '../edge/support.js';
import { startApi, testConfig, type RunningApi } from '../support/env.js';
import { startFrontDoor, type FrontDoor } from '../support/frontdoor.js';

/**
 * The whole product on loopback for the browser: a real api and a real edge behind a real nginx
 * of the stack (serving the built page), the events sink, the stream processors and the alarm
 * rules, all on a topic prefix of their own; and Chromium with a fresh profile.
 */
export interface WebStack {
  cfg: Config;
  api: RunningApi;
  fd: FrontDoor;
  browser: BrowserContext;
  /** Shuts the edge down in order (clients get 1001); the returned function starts a new one on the same port. */
  stopEdge(): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

export async function startWebStack(): Promise<WebStack> {
  ensureWebBuild(repoPath(), () => undefined);
  const prefix = `${testConfig().KAFKA_TOPIC_PREFIX}.web${randomUUID().slice(0, 6)}`;
  const overrides = { KAFKA_TOPIC_PREFIX: prefix };
  const cfg = testConfig(overrides);
  const log = createLogger('web-test', cfg.LOG_LEVEL);
  const api = await startApi(cfg);
  const { kafka, db, ch, producer, publisher, topics } = api.services;
  const stops: Array<() => Promise<void>> = [() => api.close()];
  const close = async () => {
    for (const stop of stops.reverse()) await stop().catch((err) => log.error({ err }, 'web stack: stop failed'));
  };
  try {
    const sink: RunningEventsSink = await runEventsSink(kafka, {
      groupId: `${prefix}.sink.events`, partitions: cfg.KAFKA_PARTITIONS, ch, db, producer, topics, log, batchRows: 5000, batchMs: 200, drainMs: 5000,
    });
    stops.push(() => sink.stop());
    const processors: RunningProcessors = await runProcessors({
      kafka, db, ch, producer, log, prefix, partitions: cfg.KAFKA_PARTITIONS, events: topics.events, deadLetter: topics.deadLetter,
      derived: derivedTopicNames(prefix), batchRows: 5000, batchMs: 100, drainMs: 5000, tickMs: 300,
    });
    stops.push(() => processors.stop());
    const rules: RunningAlarmRules = await runAlarmRules({ kafka, db, log, publisher, prefix, partitions: cfg.KAFKA_PARTITIONS, tickMs: 300, commitIntervalMs: 0 });
    stops.push(() => rules.stop());
    let edge = await startTestEdge(overrides);
    stops.push(() => edge.close());
    const stopEdge = async () => {
      const port = edge.port;
      await edge.close();
      return async () => {
        edge = await startTestEdge({ ...overrides, EDGE_PORT: String(port) });
      };
    };
    const fd = await startFrontDoor({ apiPort: Number(new URL(api.url).port), edgePort: edge.port });
    stops.push(() => fd.close());
    const chromium = await launchChromium();
    stops.push(() => chromium.close());
    const browser = chromium.context;
    return { cfg, api, fd, browser, stopEdge, close };
  } catch (err) {
    await close();
    throw err;
  }
}

/**
 * Where a run keeps its screenshot of each main view (to look at after a failure). Not docs/:
 * a test run must not change tracked files; `npm run screenshots` writes those.
 */
export const SCREENSHOTS = path.join(os.tmpdir(), 'venue-web-screenshots');
export function screenshot(name: string): string {
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
  return path.join(SCREENSHOTS, `${name}.png`);
}
