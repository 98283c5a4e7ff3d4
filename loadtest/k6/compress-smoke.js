// Smoke test of compression (bench.sh smoke): for every codec, Connect unary JSON and
// proto, one SELECT whose answer must come back compressed with that codec
// (SELECT * FROM medium, ~50 KB of text) and one INSERT sent compressed with it
// (the medium insert, ~50 KB of SQL; the gateway must decode it). CLIENT=h2|h3.
import { client, options as opts, summary, lastResult, fail } from './lib.js';

const CODECS = (__ENV.CODECS || 'gzip zstd snappy s2').split(' ');
const INSERT = open(`${__ENV.DATA}/medium_insert.sql`);
export const options = opts(1, 1);
export const handleSummary = summary;

export default function () {
  for (const format of ['json', 'proto']) {
    for (const codec of CODECS) {
      const c = client({ codec, format });
      c.run('SELECT 1', false);
      if (c.run('SELECT * FROM medium') && lastResult().encoding !== codec) {
        fail(`${format} ${codec}: answer came back with content-encoding "${lastResult().encoding}"`);
      }
      c.run(INSERT);
    }
  }
}
