// Sessions bench — many concurrent client sessions, each a VU with its own
// connection, sending its session back with every statement (as one
// @planetscale/database Connection does), against a MariaDB limited to
// max_connections=100 (bench.sh sessions). What must hold: no errors.
import { client, options as opts, summary } from './lib.js';

export const options = opts(5000, 20);
export const handleSummary = summary;

let c;
export default function () {
  if (!c) { c = client({ session: true }); c.run('SELECT 1', false); }
  c.run(`SELECT ${__ITER}, CONNECTION_ID()`);
}
