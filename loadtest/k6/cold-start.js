// Workload 1 — cold start: new connection, SELECT 1, close; serially (1 VU).
// MODE: resume | noresume (TLS session resumption, every client) | 0rtt (h3 only).
// The first call of the VU is a warm-up (it fills the session cache) and is not recorded.
import { client, options as opts, summary, CLIENT } from './lib.js';

const MODE = __ENV.MODE || 'noresume';
if (MODE === '0rtt' && CLIENT !== 'h3') throw new Error('MODE=0rtt is HTTP/3 only');
export const options = opts(1, 30);
export const handleSummary = summary;

let c;
export default function () {
  if (!c) {
    c = client({ fresh: true, ext: true, resume: MODE !== 'noresume', zeroRtt: MODE === '0rtt' });
    c.run('SELECT 1', false);
  }
  c.run('SELECT 1');
}
