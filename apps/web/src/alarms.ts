// The alarm table shared by a venue's Alarms card and the alarm list across venues: human labels,
// the figure that raised the alarm and the newest one, event time ("Raised") and row time ("Created").

import { api, ApiError, type Alarm } from './api.js';
import { h } from './dom.js';
import { fmtPercent, healthLabel, SEVERITY_LABEL, SEVERITY_RANK, STATUS_LABEL, timeEl, typeLabel } from './format.js';

const num = (x: unknown): number | null => (typeof x === 'number' && Number.isFinite(x) ? x : null);
const str = (x: unknown): string | null => (typeof x === 'string' && x ? x : null);

/** "now: 78 % (31 of 40)" for a zone, "now: Degraded (reason)" for a connector, from details.latest. */
export function latestLine(a: Alarm): string | null {
  if (!a.status.startsWith('ACTIVE')) return null; // "now" only while the condition lasts
  const latest = a.details?.latest;
  if (!latest || typeof latest !== 'object') return null;
  const l = latest as Record<string, unknown>;
  if (a.type === 'zone_occupancy_high' || num(l.current) !== null) {
    const current = num(l.current);
    const percent = num(l.percent);
    const capacity = num(l.capacity) ?? num(a.details?.capacity);
    if (current === null && percent === null) return null;
    if (current !== null && current === num(a.details?.current)) return null; // the message's own figure
    const share = current !== null && capacity !== null ? ` (${current} of ${capacity})` : current !== null ? ` (${current} people)` : '';
    return `now: ${percent !== null ? fmtPercent(percent) : `${current} people`}${percent !== null ? share : ''}`;
  }
  const status = str(l.status);
  if (!status) return null;
  const reason = str(l.reason);
  // Nothing new to say: the message was written from these same figures.
  if (status === str(a.details?.status) && (!reason || a.message.includes(reason))) return null;
  return `now: ${healthLabel(status)}${reason ? ` (${reason})` : ''}`;
}

export const observedAt = (a: Alarm): string | null => str(a.details?.observedAt);

export const bySeverity = (x: Alarm, y: Alarm): number =>
  SEVERITY_RANK[x.severity] - SEVERITY_RANK[y.severity] || y.createdAt.localeCompare(x.createdAt);
export const byNewest = (x: Alarm, y: Alarm): number => y.createdAt.localeCompare(x.createdAt);

export interface AlarmTableOptions {
  /** The zone an alarm's times are shown in. */
  tzOf(a: Alarm): string;
  /** A line above the message naming the venue (the list across venues). */
  venueOf?(a: Alarm): string | null;
  /** Row checkboxes for bulk actions. */
  selected?: Set<string>;
  onSelect?(): void;
  onAct(a: Alarm, action: 'ack' | 'clear'): void;
}

export function alarmTable(list: Alarm[], o: AlarmTableOptions): HTMLElement {
  const selectable = o.selected !== undefined;
  const toggleAll = (ev: Event) => {
    const on = (ev.target as HTMLInputElement).checked;
    for (const a of list) if (a.status.endsWith('_UNACK')) on ? o.selected!.add(a.id) : o.selected!.delete(a.id);
    o.onSelect?.();
  };
  const ackable = list.filter((a) => a.status.endsWith('_UNACK'));
  return h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      { class: 'alarms' },
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          selectable &&
            h(
              'th',
              { scope: 'col', class: 'select' },
              h('input', {
                type: 'checkbox',
                'aria-label': 'Select every unacknowledged alarm shown',
                checked: ackable.length > 0 && ackable.every((a) => o.selected!.has(a.id)),
                disabled: ackable.length === 0,
                onchange: toggleAll,
              }),
            ),
          h('th', { scope: 'col', class: 'sev' }, 'Severity'),
          h('th', { scope: 'col' }, 'Alarm'),
          h('th', { scope: 'col' }, 'Actions'),
        ),
      ),
      h(
        'tbody',
        {},
        ...list.map((a) => {
          const now = latestLine(a);
          const where = o.venueOf?.(a);
          const tz = o.tzOf(a);
          return h(
            'tr',
            { 'data-alarm': a.id, 'data-status': a.status, 'data-severity': a.severity },
            selectable &&
              h(
                'td',
                { class: 'select' },
                a.status.endsWith('_UNACK') &&
                  h('input', {
                    type: 'checkbox',
                    'aria-label': `Select: ${a.message}`,
                    checked: o.selected!.has(a.id),
                    onchange: (ev: Event) => {
                      (ev.target as HTMLInputElement).checked ? o.selected!.add(a.id) : o.selected!.delete(a.id);
                      o.onSelect?.();
                    },
                  }),
              ),
            h(
              'td',
              { class: 'sev' },
              h('span', { class: `pill ${a.severity.toLowerCase()}` }, SEVERITY_LABEL[a.severity]),
              h('span', { class: 'alarm-status' }, STATUS_LABEL[a.status] ?? a.status),
            ),
            h(
              'td',
              { class: 'alarm-text' },
              // On a phone the severity column is folded into this cell (style.css).
              h(
                'span',
                { class: 'sev-inline' },
                h('span', { class: `pill ${a.severity.toLowerCase()}` }, SEVERITY_LABEL[a.severity]),
                ` ${STATUS_LABEL[a.status] ?? a.status}`,
              ),
              where && h('span', { class: 'alarm-where' }, where),
              h('strong', { class: 'alarm-type' }, typeLabel(a.type)),
              h('span', { class: 'alarm-message' }, a.message),
              now && h('span', { class: 'alarm-now' }, now),
              h(
                'span',
                { class: 'when' },
                h('span', { class: 'raised' }, 'Raised ', timeEl(observedAt(a), tz, true)),
                h('span', { class: 'created' }, ' · Created ', timeEl(a.createdAt, tz)),
              ),
            ),
            h(
              'td',
              { class: 'actions-cell' },
              h(
                'div',
                { class: 'actions' },
                a.status.endsWith('_UNACK') &&
                  h(
                    'button',
                    { type: 'button', onclick: () => o.onAct(a, 'ack'), 'aria-label': `Acknowledge: ${a.message}` },
                    'Acknowledge',
                  ),
                a.status.startsWith('ACTIVE') &&
                  h(
                    'button',
                    { type: 'button', class: 'secondary', onclick: () => o.onAct(a, 'clear'), 'aria-label': `Clear: ${a.message}` },
                    'Clear',
                  ),
              ),
            ),
          );
        }),
      ),
    ),
  );
}

/**
 * Acknowledges each alarm (one POST per alarm, a few at a time); an alarm acknowledged meanwhile
 * (409 ALREADY_ACKNOWLEDGED) counts as done. Answers the summary line and the new statuses.
 */
export async function acknowledgeAll(
  ids: string[],
): Promise<{ summary: string; statuses: Map<string, Alarm['status'] | null>; failed: number }> {
  let acked = 0;
  let already = 0;
  const failures: string[] = [];
  const statuses = new Map<string, Alarm['status'] | null>();
  const queue = [...ids];
  const worker = async () => {
    for (let id = queue.shift(); id; id = queue.shift()) {
      try {
        const r = await api.alarmAction(id, 'ack');
        acked++;
        statuses.set(id, r.status);
      } catch (err) {
        if (err instanceof ApiError && err.code === 'ALREADY_ACKNOWLEDGED') {
          already++;
          const s = (err.details as { status?: Alarm['status'] } | undefined)?.status;
          statuses.set(id, s ?? null);
        } else failures.push(err instanceof ApiError ? err.text : String(err));
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(4, ids.length) }, worker));
  const parts = [`${acked} acknowledged`];
  if (already) parts.push(`${already} already ${already === 1 ? 'was' : 'were'}`);
  if (failures.length) parts.push(`${failures.length} failed: ${failures[0]}`);
  return { summary: parts.join(', '), statuses, failed: failures.length };
}
