// Serverless-shaped sessions (bench.sh serverless): each iteration is a short-lived
// client with a session of its own, as one invocation of an edge function with
// @planetscale/database: MODE=state sets a user variable and a setting, then reads
// them three times; MODE=plain runs the same four statements without state. Both
// must have no errors; the state's cost is the difference.
import { client, options as opts, summary } from './lib.js';

export const options = opts(20, 50);
export const handleSummary = summary;

const STATE = (__ENV.MODE || 'state') === 'state';

export default function () {
  const c = client({ session: true, fresh: true });
  const zone = `+0${__ITER % 10}:00`;
  c.run(STATE ? `SET @x = ${__ITER}, time_zone = '${zone}'` : `SELECT ${__ITER}`);
  for (let i = 0; i < 3; i++) {
    c.run(STATE ? 'SELECT @x, @@time_zone' : 'SELECT 1, @@time_zone');
  }
}
