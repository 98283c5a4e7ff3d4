// Workload 7 — an interactive transaction as three requests: BEGIN; INSERT; COMMIT
// (one MySQL connection per VU for the baseline; Ferry carries the session back, as
// @planetscale/database's transaction() does). One call = the whole transaction.
import { client, options as opts, summary } from './lib.js';

export const options = opts(1, 50);
export const handleSummary = summary;

let c;
export default function () {
  if (!c) {
    c = client({ session: true });
    c.run('CREATE TABLE IF NOT EXISTS bench_txn (id BIGINT PRIMARY KEY, v INT) ENGINE=InnoDB', false);
  }
  const id = __VU * 1000000 + __ITER + 1;
  c.txn(['BEGIN', `INSERT INTO bench_txn (id, v) VALUES (${id}, ${__ITER}) ON DUPLICATE KEY UPDATE v = v + 1`, 'COMMIT']);
}
