/**
 * bench:ws-send: what one push costs the edge's process, split into user and kernel CPU, for the
 * edge's own fan-out (`Subscriptions.fanOut` + `flush`: a corked write per connection) and for
 * uWebSockets.js's native publish to a topic every connection subscribes to. N `ws` clients in a
 * second process; each event is pushed in its own event-loop turn (as the edge's live tail sends a
 * lone event), and then all events in one turn (as a Kafka batch of many events for one venue).
 * No Kafka, no api: the send path alone. See benchmarks/README.md#benchws-send.
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import uWS from 'uWebSockets.js';
import WebSocket from 'ws';
import { cliArgs } from '../lib/cli.js';
import { newCounters, newOutbox, Subscriptions, type Subscriber } from '../apps/edge/subscriptions.js';
import { machine, round, writeResult } from './lib/harness.js';

type Mode = 'registry' | 'publish';
type ToServer = { push: number; gapMs: number } | { cpu: true };
type FromServer = { port: number } | { user: number; system: number };

const OPERATOR = '00000000-0000-4000-8000-00000000000a';
const VENUE = '00000000-0000-4000-8000-00000000000b';
const TOPIC = `${OPERATOR}/${VENUE}/occupancy`;

function server(mode: Mode): void {
  const counters = newCounters();
  const registry = new Subscriptions<Subscriber>({ WS_MAX_BUFFERED_BYTES: 1 << 20, WS_MAX_SUBSCRIPTIONS: 10 }, counters, console);
  const app = uWS.App();
  app.ws<Subscriber>('/ws', {
    compression: uWS.DISABLED,
    maxBackpressure: 2 << 20,
    idleTimeout: 120,
    open: (ws) => {
      const conn = ws.getUserData();
      Object.assign(conn, { operatorId: OPERATOR, open: true, ws, subs: null });
      registry.join(conn);
      registry.add(conn, 1, VENUE, ['occupancy']);
      ws.subscribe(TOPIC);
    },
    close: (ws) => registry.leave(ws.getUserData()),
  });
  let started = process.cpuUsage();
  // Events queued into one outbox are flushed together, as the edge's tail does over a Kafka batch.
  const push = (first: number, count: number) => {
    const outbox = newOutbox();
    for (let n = first; n < first + count; n++) {
      const time = new Date().toISOString();
      const item = { operatorId: OPERATOR, venueId: VENUE, eventType: 'occupancy', metrics: { occupancy: n }, time };
      // The same bytes the registry sends this subscription.
      if (mode === 'publish')
        app.publish(TOPIC, JSON.stringify({ cmdId: 1, data: { venueId: VENUE, eventType: item.eventType, metrics: item.metrics, time } }));
      else registry.fanOut(item, outbox);
    }
    registry.flush(outbox);
  };
  process.on('message', (m: ToServer) => {
    if ('cpu' in m) return process.send!({ ...process.cpuUsage(started) } satisfies FromServer);
    started = process.cpuUsage();
    if (m.gapMs === 0) push(0, m.push);
    else {
      let i = 0;
      const next = () => {
        push(i++, 1);
        if (i < m.push) setTimeout(next, m.gapMs);
      };
      next();
    }
  });
  app.listen('127.0.0.1', 0, (socket) => {
    if (!socket) throw new Error('ws-send: the server could not listen');
    process.send!({ port: uWS.us_socket_local_port(socket as unknown as uWS.us_socket) } satisfies FromServer);
  });
}

function client(port: number, connections: number): void {
  let open = 0;
  let received = 0;
  for (let i = 0; i < connections; i++) {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/ws`);
    ws.on('open', () => ++open === connections && process.send!('open'));
    ws.on('message', () => received++);
    ws.on('error', (err) => {
      console.error(`ws-send client: ${err.message}`);
      process.exit(1);
    });
  }
  process.on('message', () => process.send!({ received }));
}

/** The child's next message; a child that exits first (a client refused, a server that cannot listen) fails the run instead of hanging it. */
const reply = <T>(child: ReturnType<typeof fork>): Promise<T> =>
  new Promise((resolve, reject) => {
    const exited = (code: number | null) => reject(new Error(`ws-send: a child process exited (code ${code}) before answering`));
    child.once('exit', exited);
    child.once('message', (m) => {
      child.off('exit', exited);
      resolve(m as T);
    });
  });

async function measure(mode: Mode, connections: number, events: number, gapMs: number) {
  const self = fileURLToPath(import.meta.url);
  const srv = fork(self, ['--role', 'server', '--mode', mode]);
  const { port } = await reply<{ port: number }>(srv);
  const cli = fork(self, ['--role', 'client', '--port', String(port), '--connections', String(connections)]);
  await reply<string>(cli);
  srv.send({ push: events, gapMs } satisfies ToServer);
  const deadline = Date.now() + 60_000;
  let received = 0;
  while (received < connections * events && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    cli.send('count');
    ({ received } = await reply<{ received: number }>(cli));
  }
  srv.send({ cpu: true } satisfies ToServer);
  const cpu = await reply<{ user: number; system: number }>(srv);
  srv.kill();
  cli.kill();
  const pushes = connections * events;
  return {
    mode,
    turn: gapMs === 0 ? 'all events in one turn' : `one event a turn, ${gapMs} ms apart`,
    pushes,
    received,
    userMicrosPerPush: round(cpu.user / pushes, 2),
    systemMicrosPerPush: round(cpu.system / pushes, 2),
    cpuMicrosPerPush: round((cpu.user + cpu.system) / pushes, 2),
  };
}

const { values: args } = cliArgs(
  'npm run bench:ws-send --',
  "One push's CPU in the edge process (user and kernel), the edge's fan-out against uWebSockets.js's native publish (benchmarks/README.md#benchws-send).",
  {
    options: {
      connections: { type: 'string', default: '5000' },
      events: { type: 'string', default: '20' },
      'gap-ms': { type: 'string', default: '20' },
      rounds: { type: 'string', default: '2' },
      role: { type: 'string' },
      mode: { type: 'string' },
      port: { type: 'string' },
    },
  },
);

if (args.role === 'server') server(args.mode as Mode);
else if (args.role === 'client') client(Number(args.port), Number(args.connections));
else {
  const connections = Number(args.connections);
  const events = Number(args.events);
  const gapMs = Number(args['gap-ms']);
  console.log(`bench:ws-send  ${connections} connections, ${events} events, each in its own turn (${gapMs} ms apart) and all in one`);
  const runs = [];
  for (let r = 0; r < Number(args.rounds); r++)
    for (const gap of [gapMs, 0])
      for (const mode of ['registry', 'publish'] as const) {
        const run = await measure(mode, connections, events, gap);
        runs.push(run);
        console.log(
          `${run.mode.padEnd(8)} ${run.turn.padEnd(30)} ${run.received}/${run.pushes} delivered; ` +
            `${run.cpuMicrosPerPush} µs per push (user ${run.userMicrosPerPush}, kernel ${run.systemMicrosPerPush})`,
        );
      }
  console.log(
    `wrote ${writeResult('ws-send', { benchmark: 'ws-send', at: new Date().toISOString(), machine: machine(), settings: { connections, events, gapMs }, runs })}`,
  );
}
