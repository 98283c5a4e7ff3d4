// Workload 5 — SELECT * FROM large: 10,000 rows × 11 columns, ~27.5 MB, warm connection.
import { client, options as opts, summary } from './lib.js';

export const options = opts(1, 10);
export const handleSummary = summary;

let c;
export default function () {
  if (!c) { c = client(); c.run('SELECT 1', false); }
  c.run('SELECT * FROM large');
}
