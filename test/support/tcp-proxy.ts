import { connect, createServer, type AddressInfo, type Socket } from 'node:net';

/** A TCP proxy in front of a real engine, for faults a test controls. */
export interface TcpProxy {
  /** `target` with the proxy's host and port. */
  url: string;
  /** Cuts every connection and refuses new ones, as a stopped server would. */
  down(): void;
  up(): void;
  /** Holds what clients send (requests wait, connections stay open), as a stalled network would. */
  hold(): void;
  release(): void;
  close(): Promise<void>;
}

export async function tcpProxy(target: string): Promise<TcpProxy> {
  const upstreamUrl = new URL(target);
  const clients = new Set<Socket>();
  let isDown = false;
  let held = false;
  const server = createServer((client) => {
    if (isDown) return void client.destroy();
    const upstream = connect(Number(upstreamUrl.port), upstreamUrl.hostname);
    clients.add(client);
    const end = () => {
      clients.delete(client);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
    client.pipe(upstream).pipe(client);
    // After pipe, which resumes its source.
    if (held) client.pause();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = new URL(target);
  url.hostname = '127.0.0.1';
  url.port = String((server.address() as AddressInfo).port);
  const down = () => {
    isDown = true;
    for (const c of clients) c.destroy();
  };
  return {
    // As given: `http://host:port` stays without a trailing slash.
    url: target.endsWith('/') ? url.toString() : url.toString().replace(/\/$/, ''),
    down,
    up() {
      isDown = false;
    },
    hold() {
      held = true;
      for (const c of clients) c.pause();
    },
    release() {
      held = false;
      for (const c of clients) c.resume();
    },
    async close() {
      down();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
