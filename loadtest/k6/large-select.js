// Workload 5 — SELECT * FROM large: 10,000 rows × 11 columns, ~27.5 MB, warm connection.
// TABLE=lrand: the same shape in random bytes (the compression benchmark's incompressible rows).
import { client, paired, options as opts, summary } from './lib.js';

const TABLE = __ENV.TABLE || 'large';
// PAIR=1: each call also runs with codec identity (lib.js paired()).
export const options = opts(1, 10);
export const handleSummary = summary;

let c;
export default function () {
  if (!c) { c = __ENV.PAIR ? paired() : client(); c.run('SELECT 1', false); }
  c.run(`SELECT * FROM ${TABLE}`);
}
