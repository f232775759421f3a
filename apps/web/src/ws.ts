// The live stream (/ws, docs/websocket.md): one connection per signed-in page, one subscription
// per venue on screen (the venue view: one; the portfolio: every venue, at most 100). A lost connection reconnects with a growing, jittered backoff
// (1 s doubling to 30 s) and says so; 4001 means the key was refused; 4000-4099 are not retried.

import type { Alarm } from './api.js';

export type LiveState =
  { kind: 'connecting' } | { kind: 'live' } | { kind: 'retrying'; inSeconds: number; why: string } | { kind: 'stopped'; why: string };

export interface LiveHandlers {
  onState(state: LiveState): void;
  /** A computed occupancy figure: zoneId null is the whole venue. */
  onOccupancy(venueId: string, zoneId: string | null, occupancy: number, time: string): void;
  onAlarm(alarm: Alarm & { kind: string }): void;
  /** The socket is (re)subscribed: figures missed while it was down should be fetched again. */
  onResubscribed(venueId: string): void;
  onUnauthorized(why: string): void;
}

const MAX_SUBSCRIPTIONS = 100;

export class LiveSocket {
  private ws: WebSocket | null = null;
  /** Watched venues and their subscription's cmdId. */
  private venues = new Map<string, number>();
  private nextCmd = 1;
  private attempt = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private stopped = false;

  constructor(
    private readonly key: string,
    private readonly h: LiveHandlers,
  ) {
    this.connect();
  }

  /** Watches these venues (replacing the previous ones), or none. */
  watch(venueIds: string | string[] | null): void {
    const wanted = new Set((venueIds === null ? [] : Array.isArray(venueIds) ? venueIds : [venueIds]).slice(0, MAX_SUBSCRIPTIONS));
    const open = this.ws?.readyState === WebSocket.OPEN;
    const gone = [...this.venues].filter(([id]) => !wanted.has(id));
    for (const [id, cmdId] of gone) {
      this.venues.delete(id);
      if (open) this.ws!.send(JSON.stringify({ tsSubCmds: [{ cmdId, unsubscribe: true }] }));
    }
    const added: string[] = [];
    for (const id of wanted) {
      if (this.venues.has(id)) continue;
      this.venues.set(id, this.nextCmd++);
      added.push(id);
    }
    if (open && added.length) this.subscribe(added);
  }

  /** The venues watched now. */
  watching(venueId: string): boolean {
    return this.venues.has(venueId);
  }

  close(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.ws?.close(1000, 'signed out');
    this.ws = null;
  }

  private subscribe(ids: string[] = [...this.venues.keys()]): void {
    if (!ids.length) return;
    this.ws?.send(JSON.stringify({ tsSubCmds: ids.map((id) => ({ cmdId: this.venues.get(id), entityId: id, keys: ['occupancy'] })) }));
  }

  private connect(): void {
    if (this.stopped) return;
    this.h.onState({ kind: 'connecting' });
    const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
    const ws = new WebSocket(`${scheme}://${location.host}/ws?token=${encodeURIComponent(this.key)}`);
    this.ws = ws;
    let refusal = '';
    ws.onmessage = (ev) => {
      let msg: any; // eslint-disable-line @typescript-eslint/no-explicit-any
      try {
        msg = JSON.parse(String(ev.data));
      } catch {
        return;
      }
      if (msg.type === 'connected') {
        this.attempt = 0;
        this.h.onState({ kind: 'live' });
        this.subscribe();
      } else if (msg.type === 'subscribed') {
        this.h.onResubscribed(msg.entityId);
      } else if (msg.type === 'error') {
        refusal = `${msg.errorMsg} (${msg.errorCode})`;
      } else if (msg.data && this.venues.has(msg.data.venueId)) {
        const d = msg.data;
        if (d.eventType === 'alarm' && d.alarm) this.h.onAlarm(d.alarm);
        else if (d.eventType === 'occupancy' && 'zoneId' in d && typeof d.metrics?.occupancy === 'number') {
          this.h.onOccupancy(d.venueId, d.zoneId, d.metrics.occupancy, d.time);
        }
      }
    };
    ws.onclose = (ev) => {
      if (this.ws !== ws || this.stopped) return;
      this.ws = null;
      const why = refusal || (ev.reason ? ev.reason : 'connection lost');
      if (ev.code === 4001) {
        this.stopped = true;
        this.h.onUnauthorized(why);
        return;
      }
      if (ev.code >= 4000 && ev.code < 4100) {
        this.stopped = true;
        this.h.onState({ kind: 'stopped', why });
        return;
      }
      // 1001 (edge restarting): reconnect at once; anything else after a backoff.
      const base = ev.code === 1001 ? 0 : Math.min(30, 2 ** this.attempt);
      this.attempt++;
      const delay = base === 0 ? 0 : base * (0.75 + Math.random() * 0.5);
      this.h.onState({ kind: 'retrying', inSeconds: Math.round(delay), why });
      this.timer = setTimeout(() => this.connect(), delay * 1000);
    };
  }
}
