// Batches and idempotency keys (issue 28; docs/benchmarks/batches.md). MODE:
//   requests  a transaction of 5 INSERTs the way @planetscale/database's transaction()
//             sends it: BEGIN, the 5 statements, COMMIT, one request each, the session
//             carried (MySQL: the same 7 statements on its one connection)
//   batch     the same transaction as one ExecuteBatch (TRANSACTION mode)
//   one       one INSERT as a one-statement TRANSACTION batch, no key
//   keyed     the same with an Idempotency-Key (a new one per call): the record's lookup,
//             its INSERT in the transaction
// One call = the whole transaction (or the one INSERT).
import { client, options as opts, summary, CLIENT } from './lib.js';

export const options = opts(1, 20);
export const handleSummary = summary;

const MODE = __ENV.MODE || 'batch';
let c;
export default function () {
  if (!c) {
    c = client({ session: true, ext: true });
    c.run('CREATE TABLE IF NOT EXISTS bench_batch (id BIGINT PRIMARY KEY, v INT) ENGINE=InnoDB', false);
  }
  const base = (__VU * 1000000 + __ITER) * 10;
  const inserts = [1, 2, 3, 4, 5].map((i) =>
    `INSERT INTO bench_batch (id, v) VALUES (${base + i}, ${__ITER}) ON DUPLICATE KEY UPDATE v = v + 1`);
  switch (MODE) {
    case 'requests':
      c.txn(['BEGIN', ...inserts, 'COMMIT']);
      break;
    case 'batch':
      if (CLIENT === 'mysql') throw new Error('batch: Ferry only');
      c.batch(inserts.map((query) => ({ query })));
      break;
    case 'one':
      c.batch([{ query: inserts[0] }]);
      break;
    case 'keyed':
      c.batch([{ query: inserts[0] }], 'TRANSACTION', `bench-${__VU}-${__ITER}-${Date.now()}`);
      break;
    default:
      throw new Error(`MODE must be requests, batch, one or keyed, not ${MODE}`);
  }
}
