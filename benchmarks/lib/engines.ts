import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import type { Config } from '../../lib/config.js';
import { enginePids } from './harness.js';

/** Inodes of the sockets listening on `port` (IPv4 and IPv6). */
function listeningInodes(port: number): Set<string> {
  const inodes = new Set<string>();
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 10 || f[3] !== '0A') continue; // 0A: LISTEN
      if (parseInt(f[1]!.split(':').pop()!, 16) === port) inodes.add(f[9]!);
    }
  }
  return inodes;
}

/** The process holding a listening socket on each port, from /proc (undefined where none is found). */
export function pidsListeningOn(ports: Record<string, number>): Record<string, number | undefined> {
  const wanted = new Map<string, string>();
  for (const [name, port] of Object.entries(ports)) for (const inode of listeningInodes(port)) wanted.set(`socket:[${inode}]`, name);
  const found: Record<string, number | undefined> = Object.fromEntries(Object.keys(ports).map((n) => [n, undefined]));
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let fds: string[] = [];
    try {
      fds = readdirSync(`/proc/${entry}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        const name = wanted.get(readlinkSync(`/proc/${entry}/fd/${fd}`));
        // The lowest pid wins: Postgres' postmaster, not a backend that inherited the socket.
        if (name && (found[name] === undefined || Number(entry) < found[name]!)) found[name] = Number(entry);
      } catch {
        // closed meanwhile
      }
    }
  }
  return found;
}

const portOf = (url: string) => Number(new URL(url).port);

/** The engines' ports from the configuration. */
export function enginePorts(cfg: Config): Record<'kafka' | 'clickhouse' | 'postgres' | 'redis', number> {
  return {
    kafka: Number(cfg.KAFKA_BROKERS[0]!.split(':').pop()),
    clickhouse: portOf(cfg.CLICKHOUSE_URL),
    postgres: portOf(cfg.DATABASE_URL),
    redis: portOf(cfg.REDIS_URL),
  };
}

/**
 * The engines' processes: from this checkout's stack pid files (harness `enginePids`), else the
 * process listening on each configured port, as when the engines were started from another
 * checkout of the repository (a git worktree measuring older code against the same engines).
 */
export function engineProcesses(cfg: Config): Record<string, number | undefined> {
  const fromFiles = enginePids();
  const missing = Object.entries(fromFiles)
    .filter(([, pid]) => pid === undefined)
    .map(([name]) => name);
  if (missing.length === 0) return fromFiles;
  const ports = enginePorts(cfg);
  const byPort = pidsListeningOn(Object.fromEntries(missing.map((n) => [n, ports[n as keyof typeof ports]])));
  return { ...fromFiles, ...byPort };
}
