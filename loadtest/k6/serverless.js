// Serverless-shaped sessions (bench.sh serverless): each iteration is a short-lived
// client with a session of its own, as one invocation of an edge function with
// @planetscale/database. MODE=state sets a user variable and a setting of its own, then
// reads them three times; MODE=settings sets the same settings in every session (as an
// ORM's time_zone and sql_mode), then reads three times; MODE=plain runs four statements
// without state. All must have no errors; the state's cost is the difference.
import { client, options as opts, summary } from './lib.js';

export const options = opts(20, 50);
export const handleSummary = summary;

const MODE = __ENV.MODE || 'state';

export default function () {
  const c = client({ session: true, fresh: true });
  if (MODE === 'state') {
    c.run(`SET @x = ${__ITER}, time_zone = '+0${__ITER % 10}:00'`);
    for (let i = 0; i < 3; i++) c.run('SELECT @x, @@time_zone');
  } else if (MODE === 'settings') {
    c.run("SET time_zone = '+00:00', sql_mode = 'STRICT_ALL_TABLES,NO_ZERO_DATE'");
    for (let i = 0; i < 3; i++) c.run('SELECT 1, @@time_zone');
  } else {
    c.run(`SELECT ${__ITER}`);
    for (let i = 0; i < 3; i++) c.run('SELECT 1, @@time_zone');
  }
}
