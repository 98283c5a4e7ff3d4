// Workload 4 — bulk INSERT of the medium table's 250 rows as one multi-row
// statement (Ferry has no interactive transactions). SQL written by the fixture loader.
import { client, options as opts, summary } from './lib.js';

const SQL = open(`${__ENV.DATA}/medium_insert.sql`);
export const options = opts(4, 50);
export const handleSummary = summary;

let c;
export default function () {
  if (!c) { c = client(); c.run('SELECT 1', false); }
  c.run(SQL);
}
