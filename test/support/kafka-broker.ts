import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { repoPath } from '../../lib/paths.js';

/**
 * A throwaway single-node KRaft Kafka broker for tests that must stop and restart a real broker
 * (the stack's shared broker is never stopped: other suites use it). Same jars, server.properties
 * template and log4j config as scripts/stack.mjs, but its own free ports and its own data dir
 * under os.tmpdir(). Needs the stack's jars (.stack/kafka/libs), which global setup ensures.
 */
export interface KafkaBroker {
  /** The PLAINTEXT listener on 127.0.0.1. */
  port: number;
  /** `127.0.0.1:<port>`, for KAFKA_BROKERS. */
  brokers: string;
  /** SIGTERM, then SIGKILL if it lingers; resolves once the process has exited. */
  stop(): Promise<void>;
  /** SIGKILL at once (requests in flight may be written and never acknowledged); resolves once it has exited. */
  kill(): Promise<void>;
  /** Starts it again on the same data dir and ports (no re-format); resolves once it is ready. */
  restart(): Promise<void>;
  /** Stops it and removes its data dir. Safe to call more than once. */
  close(): Promise<void>;
  /** The broker's output so far (all starts), for failure messages. */
  output(): string;
}

const HOST = '127.0.0.1';
const LIBS = repoPath('.stack', 'kafka', 'libs');
const TEMPLATE = repoPath('stack', 'kafka', 'server.properties');
const LOG4J = repoPath('stack', 'kafka', 'log4j.properties');
const READY_TIMEOUT_MS = 60_000;
const TERM_TIMEOUT_MS = 10_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Free ports: bound to port 0 together (so they differ), then released for the broker. */
async function freePorts(n: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<net.Server>((resolve, reject) => {
          const s = net.createServer();
          s.once('error', reject);
          s.listen(0, HOST, () => resolve(s));
        }),
    ),
  );
  const ports = servers.map((s) => (s.address() as net.AddressInfo).port);
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  return ports;
}

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ port, host: HOST });
    const done = (v: boolean) => {
      s.destroy();
      resolve(v);
    };
    s.setTimeout(1000, () => done(false));
    s.once('connect', () => done(true));
    s.once('error', () => done(false));
  });
}

/** Kafka's cluster id shape (`kafka-storage random-uuid`): 16 random bytes, base64url, not starting with '-'. */
function clusterId(): string {
  for (;;) {
    const id = Buffer.from(randomUUID().replace(/-/g, ''), 'hex').toString('base64url');
    if (!id.startsWith('-')) return id;
  }
}

const tail = (text: string, lines = 15) => text.trimEnd().split('\n').slice(-lines).join('\n');

export async function startKafkaBroker(): Promise<KafkaBroker> {
  if (!fs.existsSync(LIBS) || !fs.readdirSync(LIBS).some((j) => j.startsWith('kafka_2.13-'))) {
    throw new Error(`no Kafka jars in ${LIBS}: run \`npm run stack:up\` (global setup normally does)`);
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'venue-kafka-test-'));
  const dataDir = path.join(dir, 'data');
  const propsFile = path.join(dir, 'server.properties');
  const [port, controllerPort] = (await freePorts(2)) as [number, number];

  let props = fs.readFileSync(TEMPLATE, 'utf8');
  for (const [k, v] of Object.entries({ KAFKA_DATA_DIR: dataDir, BROKER_PORT: port, CONTROLLER_PORT: controllerPort })) {
    props = props.split(`{{${k}}}`).join(String(v));
  }
  if (/\{\{[A-Z_]+\}\}/.test(props)) throw new Error(`${TEMPLATE}: unknown placeholder`);
  // The template already has these; stated here because the tests rely on them.
  props +=
    '\n# test broker\ngroup.initial.rebalance.delay.ms=0\noffsets.topic.replication.factor=1\ntransaction.state.log.replication.factor=1\n';
  fs.writeFileSync(propsFile, props);

  const javaArgs = (main: string[]) => [
    '-Xms128m',
    '-Xmx256m',
    '-XX:+UseSerialGC',
    '-XX:TieredStopAtLevel=1',
    '-XX:+ExitOnOutOfMemoryError',
    '-Djava.awt.headless=true',
    '-Djava.net.preferIPv4Stack=true',
    `-Dlog4j.configuration=file:${LOG4J}`,
    '-cp',
    `${LIBS}/*`,
    ...main,
  ];

  let out = '';
  let child: ChildProcess | null = null;
  let exited: Promise<void> = Promise.resolve();
  let closed = false;
  const killOnExit = () => child?.kill('SIGKILL');
  process.once('exit', killOnExit);

  const running = () => !!child && child.exitCode === null && child.signalCode === null;

  const launch = (main: string[]): { proc: ChildProcess; from: number } => {
    const from = out.length;
    const proc = spawn('java', javaArgs(main), { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    const collect = (c: Buffer) => {
      out += c.toString('utf8');
    };
    proc.stdout!.on('data', collect);
    proc.stderr!.on('data', collect);
    return { proc, from };
  };

  const format = async () => {
    const { proc } = launch(['kafka.tools.StorageTool', 'format', '-t', clusterId(), '-c', propsFile]);
    const code = await new Promise<number | null>((resolve, reject) => {
      proc.once('error', reject);
      proc.once('exit', (c) => resolve(c));
    });
    if (code !== 0) throw new Error(`kafka-storage format failed (exit ${code}):\n${tail(out)}`);
  };

  const run = async () => {
    if (running()) throw new Error('the test broker is already running');
    const { proc, from } = launch(['kafka.Kafka', propsFile]);
    child = proc;
    let spawnError: Error | undefined;
    exited = new Promise<void>((resolve) => {
      proc.once('error', (err) => {
        spawnError = err;
        resolve();
      });
      proc.once('exit', () => resolve());
    });
    const deadline = Date.now() + READY_TIMEOUT_MS;
    for (;;) {
      if (out.slice(from).includes('Kafka Server started') && (await portOpen(port))) return;
      if (spawnError || proc.exitCode !== null || proc.signalCode !== null) {
        throw new Error(
          `the test broker exited during start-up (${spawnError?.message ?? proc.exitCode ?? proc.signalCode}):\n${tail(out.slice(from))}`,
        );
      }
      if (Date.now() > deadline)
        throw new Error(`the test broker was not ready within ${READY_TIMEOUT_MS / 1000}s:\n${tail(out.slice(from))}`);
      await sleep(100);
    }
  };

  const stop = async () => {
    if (!child || !running()) return;
    const proc = child;
    proc.kill('SIGTERM');
    const term = await Promise.race([exited.then(() => true), sleep(TERM_TIMEOUT_MS).then(() => false)]);
    if (!term) {
      proc.kill('SIGKILL');
      await exited;
    }
  };

  const close = async () => {
    if (closed) return;
    closed = true;
    try {
      await stop();
    } finally {
      process.removeListener('exit', killOnExit);
      if (!process.env.KEEP_TEST_DATA) fs.rmSync(dir, { recursive: true, force: true });
    }
  };

  try {
    await format();
    await run();
  } catch (err) {
    await close();
    throw err;
  }

  return {
    port,
    brokers: `${HOST}:${port}`,
    stop,
    async kill() {
      if (!child || !running()) return;
      child.kill('SIGKILL');
      await exited;
    },
    async restart() {
      if (closed) throw new Error('the test broker is closed');
      await run();
    },
    close,
    output: () => out,
  };
}
