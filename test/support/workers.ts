/** Worker databases global-setup creates (copies of the migrated run database), one per e2e worker. */
export const TEST_WORKERS = 4;

/** The run's id stays the name's last part, which global-setup reads to drop a crashed run's leftovers. */
export const workerDb = (base: string, worker: number, runId: string) => `${base}_test_w${worker}_${runId}`;
