import { createRequire } from 'node:module';
import kafkajs from 'kafkajs';

/** A coordinator found is asked again after this long even if nothing failed (a moved coordinator answers NOT_COORDINATOR meanwhile). */
const KEEP_MS = 60_000;

interface Cluster {
  findGroupCoordinator(q: { groupId: string; coordinatorType?: number }): Promise<object>;
  connect(): Promise<void>;
  disconnect(): Promise<void>;
}

interface Known {
  broker: Promise<object>;
  until: number;
}

const known = new WeakMap<Cluster, Map<string, Known>>();

/**
 * The broker codes that say the coordinator moved or cannot be reached through this connection:
 * NETWORK_EXCEPTION, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, TRANSACTION_COORDINATOR_FENCED.
 */
const MOVED_CODES = new Set([13, 15, 16, 52]);

// kafkajs is CommonJS and spreads its errors into its exports, which Node's named ESM imports do not see.
const { KafkaJSProtocolError } = kafkajs;

/**
 * Whether a failed request means the coordinator should be looked up again: a broker answer that
 * says it is not (or no longer) the coordinator, or no answer at all (a connection lost, a request
 * timed out). Any other answer came from the coordinator itself: CONCURRENT_TRANSACTIONS, which a
 * transaction meets while the broker still writes the previous one's markers, is retried against
 * the same broker.
 */
export function movesCoordinator(err: unknown): boolean {
  return !(err instanceof KafkaJSProtocolError) || MOVED_CODES.has(err.code);
}

/**
 * Keeps the coordinators kafkajs 2.2.4 finds, per client and group (or transactional id). Its
 * transactional producer asks the broker for the transaction coordinator before each of
 * AddPartitionsToTxn, AddOffsetsToTxn and EndTxn and for the group's coordinator before
 * TxnOffsetCommit: four FindCoordinator round trips in each processor transaction, about one in
 * seven of the broker's requests in bench:ingest (benchmarks/README.md, "Coordinators kept").
 * A request sent to a kept coordinator that fails as `movesCoordinator` says forgets it, so the retry
 * that follows (kafkajs's own, or the processor's next transaction) looks it up again: a coordinator
 * that moved answers NOT_COORDINATOR once. A client that connects or disconnects forgets them all: its brokers'
 * connections are made anew. Returns false when kafkajs no longer has the methods.
 */
export function keepCoordinators(): boolean {
  const Cluster = createRequire(import.meta.url)('kafkajs/src/cluster/index.js') as { prototype: Cluster };
  const proto = Cluster.prototype;
  const { findGroupCoordinator: find, connect, disconnect } = proto as Partial<Cluster>;
  if (typeof find !== 'function' || typeof connect !== 'function' || typeof disconnect !== 'function') return false;
  proto.connect = function (this: Cluster) {
    known.delete(this);
    return connect.call(this);
  };
  proto.disconnect = function (this: Cluster) {
    known.delete(this);
    return disconnect.call(this);
  };
  proto.findGroupCoordinator = function (this: Cluster, q) {
    let mine = known.get(this);
    if (!mine) known.set(this, (mine = new Map()));
    const key = `${q.coordinatorType ?? 0}:${q.groupId}`;
    const now = Date.now();
    const hit = mine.get(key);
    if (hit && hit.until > now) return hit.broker;
    // Forgets this lookup's answer only: a later lookup may have replaced it meanwhile.
    const forget = () => {
      if (mine.get(key)?.broker === broker) mine.delete(key);
    };
    const broker: Promise<object> = find.call(this, q).then(
      (b) => forgettingOnError(b, forget),
      (err: unknown) => {
        forget();
        throw err;
      },
    );
    mine.set(key, { broker, until: now + KEEP_MS });
    return broker;
  };
  return true;
}

/** The broker, its requests forgetting it as the coordinator when they fail as if it moved. */
function forgettingOnError(broker: object, forgetAny: () => void): object {
  const forget = (err: unknown) => {
    if (movesCoordinator(err)) forgetAny();
  };
  return new Proxy(broker, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        let result: unknown;
        try {
          result = (value as (...a: unknown[]) => unknown).apply(target, args);
        } catch (err) {
          forget(err);
          throw err;
        }
        if (!(result instanceof Promise)) return result;
        return result.catch((err: unknown) => {
          forget(err);
          throw err;
        });
      };
    },
  });
}
