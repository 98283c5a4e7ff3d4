// Sweep — sysbench oltp_point_select: SELECT c FROM sbtest WHERE id=?, random id,
// warm connection per VU; run with DURATION and VUS = the concurrency point.
import { client, options as opts, summary } from './lib.js';

export const options = opts(4, 100);
export const handleSummary = summary;

let c;
export default function () {
  if (!c) { c = client(); c.run('SELECT 1', false); }
  c.run(`SELECT c FROM sbtest WHERE id=${1 + Math.floor(Math.random() * 10000)}`);
}
