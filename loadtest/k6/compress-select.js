// Sweep — SELECT * FROM $TABLE (ztext: compressible words, zrand: random bytes; ~1 MB each),
// with MySQL zlib compression (COMPRESS=1) or Ferry with HEADERS asking for gzip/zstd.
import { client, options as opts, summary } from './lib.js';

const TABLE = __ENV.TABLE || 'ztext';
export const options = opts(1, 10);
export const handleSummary = summary;

let c;
export default function () {
  if (!c) { c = client(); c.run('SELECT 1', false); }
  c.run(`SELECT * FROM ${TABLE}`);
}
