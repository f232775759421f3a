import { spawn } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { createInterface } from 'node:readline';
import { describe, expect, it } from 'vitest';

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

interface LogLine {
  level: number;
  msg: string;
  error?: string;
}

/**
 * Starts an app, collects its JSON log until `ready` is logged, stops it with SIGTERM and returns every
 * line. Whatever reaches stderr (a library writing to the console) counts as a warning.
 */
async function startAndStop(entry: string, ready: string, env: Record<string, string>): Promise<LogLine[]> {
  const child = spawn(process.execPath, ['node_modules/vite-node/vite-node.mjs', entry], {
    env: { ...process.env, LOG_LEVEL: 'info', SHUTDOWN_TIMEOUT_MS: '20000', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: LogLine[] = [];
  let seenReady: () => void;
  const isReady = new Promise<void>((resolve) => (seenReady = resolve));
  createInterface({ input: child.stdout! }).on('line', (text) => {
    try {
      const line = JSON.parse(text) as LogLine;
      lines.push(line);
      if (line.msg === ready) seenReady();
    } catch {
      lines.push({ level: 60, msg: `not a JSON log line: ${text}` });
    }
  });
  createInterface({ input: child.stderr! }).on('line', (text) => lines.push({ level: 40, msg: `on stderr: ${text}` }));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const timeout = setTimeout(() => child.kill('SIGKILL'), 40_000);
  await Promise.race([isReady, exited]);
  child.kill('SIGTERM');
  const code = await exited;
  clearTimeout(timeout);
  expect(code, `${entry} exit code; log: ${JSON.stringify(lines)}`).toBe(0);
  expect(
    lines.map((l) => l.msg),
    entry,
  ).toContain(ready);
  return lines;
}

// pino levels: 40 warn, 50 error, 60 fatal.
const warnings = (lines: LogLine[]) => lines.filter((l) => l.level >= 40).map((l) => (l.error ? `${l.msg}: ${l.error}` : l.msg));

describe('start-up with a correct configuration', () => {
  it('the api, the pipeline and the edge log no warning or error from start to a clean stop', async () => {
    // Under the run's prefix: the run's teardown deletes these topics with its own.
    const prefix = `${process.env.KAFKA_TOPIC_PREFIX}.startup`;
    const [api, pipeline, edge] = await Promise.all([
      startAndStop('apps/api/main.ts', 'api listening', {
        API_PORT: String(await freePort()),
        API_HOST: '127.0.0.1',
        KAFKA_TOPIC_PREFIX: prefix,
      }),
      startAndStop('apps/pipeline/main.ts', 'pipeline running', { KAFKA_TOPIC_PREFIX: prefix }),
      startAndStop('apps/edge/main.ts', 'edge listening', {
        EDGE_PORT: String(await freePort()),
        EDGE_HOST: '127.0.0.1',
        KAFKA_TOPIC_PREFIX: prefix,
      }),
    ]);
    expect(warnings(api)).toEqual([]);
    expect(warnings(pipeline)).toEqual([]);
    expect(warnings(edge)).toEqual([]);
  }, 90_000);

  it('two pipeline processes sharing every group (concurrent topic creation, rebalances) log no warning or error', async () => {
    const prefix = `${process.env.KAFKA_TOPIC_PREFIX}.startup2`;
    const pipelines = await Promise.all(
      [0, 1].map(() =>
        startAndStop('apps/pipeline/main.ts', 'pipeline running', { KAFKA_TOPIC_PREFIX: prefix, PIPELINE_METRICS_PORT: '0' }),
      ),
    );
    // Both joined groups the other was in: the rebalances really happened.
    for (const lines of pipelines) expect(lines.map((l) => l.msg)).toContain('joined group');
    expect(pipelines.map(warnings)).toEqual([[], []]);
  }, 90_000);
});
