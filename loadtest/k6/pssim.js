// Ferry beside ps-http-sim (loadtest/pssim.sh, docs/benchmarks/ps-http-sim.md): warm
// SELECT 1, one connection per VU, each VU carrying its psdb session from answer to answer
// as one @planetscale/database Connection does; Connect JSON through our extension's
// HTTP/2 client (Go x/net/http2), so both sides run the same client: FERRY_URL https://...
// (TLS 1.3) for Ferry, http://... (h2c, prior knowledge) for ps-http-sim.
// What must hold: no errors, and the session really carried (its SessionUUID never
// changes after the first answer: ps-http-sim keys its MySQL connection by it).
import { client, options as opts, summary, lastResult, fail } from './lib.js';

export const options = opts(32, 200);
export const handleSummary = summary;

const uuidOf = (body) => (/"SessionUUID":\s*"([^"]*)"/.exec(body || '') || [])[1] || '';

let c, uuid;
export default function () {
  if (!c) {
    c = client({ ext: true, session: true });
    if (c.run('SELECT 1', false)) uuid = uuidOf(lastResult().body);
    if (!uuid) fail('the first answer carried no session');
  }
  if (c.run('SELECT 1') && uuidOf(lastResult().body) !== uuid) fail('the session changed: not carried');
}
