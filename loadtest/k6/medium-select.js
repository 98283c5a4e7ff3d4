// Workload 3 — SELECT * FROM medium: 250 rows × 2 columns, ~50 KB, warm connection.
import { client, paired, options as opts, summary } from './lib.js';

// PAIR=1: each call also runs with codec identity (lib.js paired()).
export const options = opts(4, 50);
export const handleSummary = summary;

let c;
export default function () {
  if (!c) { c = __ENV.PAIR ? paired() : client(); c.run('SELECT 1', false); }
  c.run('SELECT * FROM medium');
}
