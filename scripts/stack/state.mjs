import fs from 'node:fs';
import path from 'node:path';
import { FILES, STACK_DIR, httpGet, mkdirp, pidAlive, readPid, rel, sleep } from './common.mjs';

/** Runs fn while holding .stack/.lock, so two `up`/`down` runs never race (a dead holder's lock is taken over). */
export async function withLock(fn) {
  mkdirp(STACK_DIR);
  const deadline = Date.now() + 180_000;
  for (;;) {
    try {
      fs.writeFileSync(FILES.lock, String(process.pid), { flag: 'wx' });
      break;
    } catch (e) {
      if (e.code !== 'EEXIST') throw e;
      const holder = readPid(FILES.lock);
      if (!holder || holder === process.pid || !pidAlive(holder)) {
        try {
          fs.unlinkSync(FILES.lock);
        } catch {
          /* raced */
        }
        continue;
      }
      if (Date.now() > deadline) throw new Error(`stack: another stack.mjs (pid ${holder}) holds ${rel(FILES.lock)}`);
      await sleep(250);
    }
  }
  try {
    return await fn();
  } finally {
    try {
      if (readPid(FILES.lock) === process.pid) fs.unlinkSync(FILES.lock);
    } catch {
      /* ignore */
    }
  }
}

/**
 * Runs a long first-run step (a package install, a download) with a line when it starts, one every
 * 15 s while it runs, and its duration at the end: a silent terminal looks hung.
 */
export async function timed(label, log, fn, everyMs = 15_000) {
  const t0 = Date.now();
  const secs = () => Math.round((Date.now() - t0) / 1000);
  const ticker = setInterval(() => log(`${label} … still running (${secs()} s)`), everyMs);
  try {
    const result = await fn();
    log(`${label} done in ${secs()} s`);
    return result;
  } finally {
    clearInterval(ticker);
  }
}

/**
 * The service processes a launcher started (`npm run up`: api, edge, pipeline; the simulator), so
 * `stack.mjs status` can list them beside the engines: name → { pid, port, health (URL), startedAt }.
 */
export const PROCESSES_FILE = path.join(STACK_DIR, 'processes.json');

export function readProcesses() {
  try {
    return JSON.parse(fs.readFileSync(PROCESSES_FILE, 'utf8'));
  } catch {
    return {};
  }
}

export function registerProcess(name, info) {
  mkdirp(STACK_DIR);
  const all = readProcesses();
  all[name] = { ...info, startedAt: new Date().toISOString() };
  fs.writeFileSync(PROCESSES_FILE, `${JSON.stringify(all, null, 2)}\n`);
}

export function unregisterProcess(name, pid) {
  const all = readProcesses();
  if (!all[name] || (pid !== undefined && all[name].pid !== pid)) return;
  delete all[name];
  try {
    fs.writeFileSync(PROCESSES_FILE, `${JSON.stringify(all, null, 2)}\n`);
  } catch {
    /* the stack folder is gone */
  }
}

export function readState() {
  try {
    return JSON.parse(fs.readFileSync(FILES.state, 'utf8'));
  } catch {
    return { services: {} };
  }
}

export function writeState(state) {
  mkdirp(STACK_DIR);
  fs.writeFileSync(FILES.state, `${JSON.stringify(state, null, 2)}\n`);
}

/**
 * The service processes a launcher registered (`npm run up`, the simulator): running when the pid
 * is alive, with its /health answer where it has one; entries of exited processes are left out.
 */
export async function processStatus() {
  const out = [];
  for (const [name, p] of Object.entries(readProcesses())) {
    if (!p?.pid || !pidAlive(p.pid)) continue;
    let health = null;
    if (p.health) {
      const r = await httpGet(p.health, { timeoutMs: 1500 });
      const body = (() => {
        try {
          return JSON.parse(r?.body ?? '');
        } catch {
          return null;
        }
      })();
      health = !r ? 'not answering' : (body?.status ?? (r.status === 200 ? 'answering' : `HTTP ${r.status}`));
    }
    out.push({ name, pid: p.pid, port: p.port ?? null, health, startedAt: p.startedAt ?? null });
  }
  return out;
}
