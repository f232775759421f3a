import { Counter, Gauge, type Registry } from 'prom-client';
import { createRegistry } from '../../lib/metrics.js';
import type { EdgeStats } from './server.js';

/** The edge's Prometheus metrics, read from its live counters at each scrape (docs/metrics.md). */
export function createEdgeRegistry(stats: () => EdgeStats): Registry {
  const registry = createRegistry('edge');
  const gauge = (name: string, help: string, pick: (s: EdgeStats) => number) =>
    new Gauge({
      name,
      help,
      registers: [registry],
      collect() {
        this.set(pick(stats()));
      },
    });
  // Totals kept by the edge: exposed as counters that are set to the running total at each scrape.
  const total = (name: string, help: string, pick: (s: EdgeStats) => number) =>
    new Counter({
      name,
      help,
      registers: [registry],
      collect() {
        this.reset();
        this.inc(pick(stats()));
      },
    });
  gauge('ws_connections', 'Open /ws connections on this edge', (s) => s.connections);
  gauge('ws_operators', 'Operators with at least one open connection on this edge', (s) => s.operators);
  gauge('ws_subscriptions', 'Subscriptions held by the open connections', (s) => s.subscriptions);
  total('ws_messages_sent_total', 'Frames sent to clients: pushes and replies', (s) => s.messagesSent);
  total('ws_messages_received_total', 'Frames received from clients', (s) => s.messagesReceived);
  total('ws_refused_total', 'Connections refused (bad key, limit, keys not checkable)', (s) => s.refused);
  total('ws_closed_slow_total', 'Connections closed as slow consumers (4108)', (s) => s.closedSlow);
  total('ws_closed_rotated_total', 'Connections closed because their key was rotated (4001)', (s) => s.closedRotated);
  return registry;
}
