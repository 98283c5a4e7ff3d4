// Workload 6 — bulk INSERT of 2,000 rows of the large table (~5.5 MB of SQL), one statement.
// INSERT=lrand_insert.sql: 2,000 rows of random bytes as X'hex' (the compression benchmark).
import { client, options as opts, summary } from './lib.js';

const SQL = open(`${__ENV.DATA}/${__ENV.INSERT || 'large_insert.sql'}`);
export const options = opts(1, 10);
export const handleSummary = summary;

let c;
export default function () {
  if (!c) { c = client(); c.run('SELECT 1', false); }
  c.run(SQL);
}
