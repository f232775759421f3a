// The live stream (/ws, docs/websocket.md): one connection per signed-in page, one subscription
// (cmdId 1) to the venue on screen. A lost connection reconnects with a growing, jittered backoff
// (1 s doubling to 30 s) and says so; 4001 means the key was refused; 4000-4099 are not retried.

import type { Alarm } from './api.js';

export type LiveState = { kind: 'connecting' } | { kind: 'live' } | { kind: 'retrying'; inSeconds: number; why: string } | { kind: 'stopped'; why: string };

export interface LiveHandlers {
  onState(state: LiveState): void;
  /** A computed occupancy figure: zoneId null is the whole venue. */
  onOccupancy(venueId: string, zoneId: string | null, occupancy: number, time: string): void;
  onAlarm(alarm: Alarm & { kind: string }): void;
  /** The socket is (re)subscribed: figures missed while it was down should be fetched again. */
  onResubscribed(venueId: string): void;
  onUnauthorized(why: string): void;
}

const CMD_ID = 1;

export class LiveSocket {
  private ws: WebSocket | null = null;
  private venueId: string | null = null;
  private attempt = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private stopped = false;

  constructor(
    private readonly key: string,
    private readonly h: LiveHandlers,
  ) {
    this.connect();
  }

  /** Watches one venue (replaces the previous one), or none. */
  watch(venueId: string | null): void {
    const previous = this.venueId;
    this.venueId = venueId;
    if (this.ws?.readyState !== WebSocket.OPEN) return;
    if (venueId) this.subscribe();
    else if (previous) this.ws.send(JSON.stringify({ tsSubCmds: [{ cmdId: CMD_ID, unsubscribe: true }] }));
  }

  close(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.ws?.close(1000, 'signed out');
    this.ws = null;
  }

  private subscribe(): void {
    this.ws?.send(JSON.stringify({ tsSubCmds: [{ cmdId: CMD_ID, entityId: this.venueId, keys: ['occupancy'] }] }));
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
        if (this.venueId) this.subscribe();
      } else if (msg.type === 'subscribed') {
        this.h.onResubscribed(msg.entityId);
      } else if (msg.type === 'error') {
        refusal = `${msg.errorMsg} (${msg.errorCode})`;
      } else if (msg.data && msg.data.venueId === this.venueId) {
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
