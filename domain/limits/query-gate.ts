import { AppError } from '../../lib/errors.js';

export interface QueryGateLimits {
  /** Expensive queries one operator may have running at once on this instance. */
  perOperator: number;
  /** Expensive queries running at once on this instance, all operators together. */
  total: number;
  /** Queries one operator may have waiting; past it the next is refused at once. */
  maxWaiting: number;
  /** How long a query may wait for its turn before it is refused. */
  maxWaitMs: number;
}

/** Running and waiting figures, for the metrics. */
export interface QueryGateLoad {
  running: number;
  waiting: number;
}

interface Waiter {
  operatorId: string;
  weight: number;
  grant: (release: () => void) => void;
  refuse: (err: AppError) => void;
}

/** Retry-After of a refused query: a turn comes free within a query's time; a second is ample. */
const RETRY_AFTER_SECONDS = 1;

/**
 * Admission of expensive reads (ClickHouse scans), so one operator's heavy queries cannot crowd out
 * another's: at most `perOperator` of an operator's queries run at once, and at most `total` of all.
 * The rest wait in line per operator; a freed slot goes to the operators in turn (round robin), so
 * another operator's next query waits for at most one query of each busy operator, not for a
 * backlog. A query that cannot get its turn within `maxWaitMs`, or finds `maxWaiting` of its
 * operator's already waiting, is refused with 429 and Retry-After. Counts are per api instance.
 */
export class QueryGate {
  private readonly running = new Map<string, number>();
  private readonly waiting = new Map<string, Waiter[]>();
  /** Operators with someone waiting, in the order they get their next turn. */
  private readonly turns: string[] = [];
  private runningTotal = 0;

  constructor(private readonly limits: QueryGateLimits) {}

  load(): QueryGateLoad {
    let waiting = 0;
    for (const line of this.waiting.values()) waiting += line.length;
    return { running: this.runningTotal, waiting };
  }

  /**
   * Resolves with the function that gives the turns back (calling it again does nothing), once the
   * query's answer has been read to the end or abandoned. `weight`: the turns the query takes, so a
   * large read can take all of its operator's (at most `perOperator`). `signal` withdraws a query
   * still waiting.
   */
  acquire(operatorId: string, signal?: AbortSignal, weight = 1): Promise<() => void> {
    const w = Math.min(Math.max(1, weight), this.limits.perOperator, this.limits.total);
    // Not ahead of the operator's own reads already waiting.
    if (!this.waiting.has(operatorId) && this.mayRun(operatorId, w)) return Promise.resolve(this.grant(operatorId, w));
    const line = this.waiting.get(operatorId) ?? [];
    if (line.length >= this.limits.maxWaiting) return Promise.reject(this.refusal('waiting'));
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        operatorId,
        weight: w,
        grant: (release) => {
          done();
          resolve(release);
        },
        refuse: (err) => {
          done();
          reject(err);
        },
      };
      const timer = setTimeout(
        () => this.withdraw(waiter, this.refusal(this.atOwnCap(operatorId, w) ? 'timeout' : 'busy')),
        this.limits.maxWaitMs,
      );
      // Nobody reads this answer: the client is gone; withdrawing frees its place in line.
      const onAbort = () => this.withdraw(waiter, new AppError(503, 'SERVICE_UNAVAILABLE', 'request abandoned while waiting for its turn'));
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      line.push(waiter);
      this.waiting.set(operatorId, line);
      if (!this.turns.includes(operatorId)) this.turns.push(operatorId);
    });
  }

  private atOwnCap(operatorId: string, weight = 1): boolean {
    return (this.running.get(operatorId) ?? 0) + weight > this.limits.perOperator;
  }

  private mayRun(operatorId: string, weight: number): boolean {
    return this.runningTotal + weight <= this.limits.total && !this.atOwnCap(operatorId, weight);
  }

  private grant(operatorId: string, weight: number): () => void {
    this.running.set(operatorId, (this.running.get(operatorId) ?? 0) + weight);
    this.runningTotal += weight;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.running.get(operatorId) ?? weight) - weight;
      if (left === 0) this.running.delete(operatorId);
      else this.running.set(operatorId, left);
      this.runningTotal -= weight;
      this.admitNext();
    };
  }

  /** Gives free slots to waiting operators in turn; an operator at its own cap keeps its place. */
  private admitNext(): void {
    for (let passed = 0; passed < this.turns.length && this.runningTotal < this.limits.total;) {
      const operatorId = this.turns.shift()!;
      const line = this.waiting.get(operatorId)!;
      if (!this.mayRun(operatorId, line[0]!.weight)) {
        this.turns.push(operatorId);
        passed++;
        continue;
      }
      const waiter = line.shift()!;
      if (line.length === 0) this.waiting.delete(operatorId);
      else this.turns.push(operatorId);
      passed = 0;
      waiter.grant(this.grant(operatorId, waiter.weight));
    }
  }

  private withdraw(waiter: Waiter, err: AppError): void {
    const line = this.waiting.get(waiter.operatorId);
    const at = line?.indexOf(waiter) ?? -1;
    if (!line || at === -1) return;
    line.splice(at, 1);
    if (line.length === 0) {
      this.waiting.delete(waiter.operatorId);
      this.turns.splice(this.turns.indexOf(waiter.operatorId), 1);
    }
    waiter.refuse(err);
  }

  /** 429 when the operator's own queries hold it up; 503 when the instance is busy with everyone's. */
  private refusal(why: 'waiting' | 'timeout' | 'busy'): AppError {
    const { perOperator, maxWaiting, maxWaitMs } = this.limits;
    const retry = { 'Retry-After': String(RETRY_AFTER_SECONDS) };
    if (why === 'busy') {
      return new AppError(
        503,
        'SERVICE_UNAVAILABLE',
        `the service is busy with expensive queries and this one waited over ${maxWaitMs / 1000} s for its turn; retry in ${RETRY_AFTER_SECONDS} s`,
        { retryAfter: RETRY_AFTER_SECONDS },
        retry,
      );
    }
    const message =
      why === 'waiting'
        ? `${maxWaiting} expensive queries of this operator are already waiting behind the ${perOperator} it may run at once; retry in ${RETRY_AFTER_SECONDS} s, or ask fewer at a time`
        : `this operator's expensive queries (at most ${perOperator} at once) kept this one waiting over ${maxWaitMs / 1000} s; retry in ${RETRY_AFTER_SECONDS} s, or ask for smaller ranges`;
    return new AppError(429, 'RATE_LIMITED', message, { concurrentLimit: perOperator, retryAfter: RETRY_AFTER_SECONDS }, retry);
  }
}
