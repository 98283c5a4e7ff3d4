// Workload 2 — SELECT 1 in parallel on warm connections (one per VU, reused).
import { client, options as opts, summary } from './lib.js';

export const options = opts(16, 200);
export const handleSummary = summary;

let c;
export default function () {
  if (!c) { c = client(); c.run('SELECT 1', false); }
  c.run('SELECT 1');
}
