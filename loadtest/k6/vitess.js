// Vitess (issue 27; loadtest/vitess.sh): one warm connection per VU against a sharded table
// (vt_bench in keyspace ferry, primary vindex hash(id), ROWS rows, k = id % KEYS):
//   QUERY=point    SELECT c FROM vt_bench WHERE id=<random>   by the vindex: one shard
//   QUERY=scatter  SELECT id, c FROM vt_bench WHERE k=<random>   k is no vindex: every shard,
//                  ROWS / KEYS rows (10) merged by vtgate
// CLIENT=mysql: the MySQL protocol + TLS straight to vtgate; h2 / h3: Ferry in front of it.
// RATE=<calls/s>: each VU paces itself to RATE / VUS calls a second (it sleeps until its next
// slot; a late call is not dropped, the next slots catch up) instead of as many as it can make.
import { sleep } from 'k6';
import { client, options as opts, summary } from './lib.js';

const QUERY = __ENV.QUERY || 'point';
const TABLE = __ENV.TABLE || 'vt_bench';
const ROWS = Number(__ENV.ROWS || 10000), KEYS = Number(__ENV.KEYS || 1000);
if (QUERY !== 'point' && QUERY !== 'scatter') throw new Error(`QUERY must be point or scatter, not ${QUERY}`);

const SLOT_MS = __ENV.RATE ? 1000 * Number(__ENV.VUS || 1) / Number(__ENV.RATE) : 0;
export const options = opts(1, 100);
export const handleSummary = summary;

function sql() {
  if (QUERY === 'point') return `SELECT c FROM ${TABLE} WHERE id=${1 + Math.floor(Math.random() * ROWS)}`;
  return `SELECT id, c FROM ${TABLE} WHERE k=${Math.floor(Math.random() * KEYS)}`;
}

let c, next = 0;
export default function () {
  if (!c) { c = client(); c.run(sql(), false); next = Date.now(); }
  if (SLOT_MS) {
    const wait = next - Date.now();
    if (wait > 0) sleep(wait / 1000);
    next += SLOT_MS;
  }
  c.run(sql());
}
