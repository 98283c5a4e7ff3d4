// Soak (issue 29; loadtest/soak.sh, docs/benchmarks/soak.md): a moderate, mixed load held for
// DURATION against one Ferry stack, one k6 process per protocol (CLIENT=h2 | h3). Every kind
// of call runs as its own constant-arrival-rate scenario, counted in soak_calls_<kind> and
// soak_errors_<kind> (every error is a failure of the soak):
//   read        kept connection: a point read or a 50-row range of soak_kv
//   read_fresh  a new connection (TLS handshake) per call, SELECT 1; resumption on every other
//               call (HTTP/3: 0-RTT on those)
//   write       REPLACE INTO soak_kv (kept connection)
//   txn         BEGIN; UPDATE; INSERT … ON DUPLICATE KEY UPDATE; COMMIT with the session carried
//   compressed  a ~40 KB compressible read and a ~2 KiB write, the codec rotating through
//               gzip, zstd, snappy and s2 (requests ≥ 1 KiB are sent compressed too)
//   proto       Connect unary proto (application/proto) reads
//   stream      (h2 only) StreamExecute in Connect streaming JSON (application/connect+json):
//               2,000 rows of ~500 B over k6's own HTTP/2 client; the envelopes are taken apart,
//               the rows counted and the end message checked for an error
// Keys: each VU writes its own keys (KEYBASE + VU × 1000 + 0…99), all seeded by soak.sh
// (VUs 1…200), so writers never wait on each other's locks (no gap locks: every key exists)
// and soak_kv stays bounded. Rates: RATE × the per-kind base below.
// Env: CLIENT, FERRY_URL, CA, DURATION (e.g. 30m), RATE (1), KEYBASE (0; h3 runs with 500000).
import http from 'k6/http';
import { Counter, Trend } from 'k6/metrics';
import { b64encode } from 'k6/encoding';
import { client, lastResult, summary, CLIENT } from './lib.js';

const E = __ENV;
const DURATION = E.DURATION || '2m';
const RATE = Number(E.RATE || 1);
const KEYBASE = Number(E.KEYBASE || 0);
const FERRY_URL = E.FERRY_URL || 'https://127.0.0.1:8443';
const AUTH = 'Basic ' + b64encode(`${E.DB_USER || 'ferry'}:${E.DB_PASSWORD || 'ferry'}`);
const STREAM_ROWS = Number(E.STREAM_ROWS || 2000);

// kind -> calls per second (× RATE).
const BASE = { read: 15, read_fresh: 2, write: 5, txn: 2, compressed: 3, proto: 4, stream: 1 };
const KINDS = Object.keys(BASE).filter((k) => k !== 'stream' || CLIENT === 'h2');

const calls = {}, errors = {}, ms = {};
for (const k of Object.keys(BASE)) {
  calls[k] = new Counter(`soak_calls_${k}`);
  errors[k] = new Counter(`soak_errors_${k}`);
  ms[k] = new Trend(`soak_ms_${k}`, true);
}
const encoded = new Counter('soak_answers_encoded'); // compressed answers that came back encoded
const streamRows = new Counter('soak_stream_rows');
const streamMessages = new Counter('soak_stream_messages');

const scenarios = {};
for (const k of KINDS) {
  const rate = Math.max(1, Math.round(BASE[k] * RATE));
  scenarios[k] = {
    executor: 'constant-arrival-rate', exec: k, rate, timeUnit: '1s', duration: DURATION,
    preAllocatedVUs: Math.min(4, rate), maxVUs: 8, gracefulStop: '30s',
  };
}
export const options = {
  scenarios,
  summaryTrendStats: ['min', 'p(50)', 'p(95)', 'p(99)', 'max', 'avg', 'count'],
  tlsVersion: { min: 'tls1.3', max: 'tls1.3' },
  discardResponseBodies: false,
  setupTimeout: '2m',
};
export const handleSummary = summary;

// One client per VU and kind (VUs of one scenario keep their connections).
const clients = {};
function get(name, make) {
  if (!clients[name]) clients[name] = make();
  return clients[name];
}

let logged = 0;
function record(kind, ok, t, detail) {
  calls[kind].add(1);
  if (ok) {
    ms[kind].add(t);
    return;
  }
  errors[kind].add(1);
  if (logged++ < 20) console.error(`soak ${CLIENT} ${kind}: ${detail || lastResult().error}`);
}

// call(kind, c, sql): one run() through lib.js's client, recorded under kind.
function call(kind, c, sql) {
  const ok = c.run(sql, true);
  const r = lastResult();
  record(kind, ok, r.ms);
  return r;
}

const key = (n) => KEYBASE + __VU * 1000 + (n % 100);

export function read() {
  const c = get('read', () => client());
  if (__ITER % 2 === 0) call('read', c, `SELECT k, v, note FROM soak_kv WHERE k = ${key(__ITER)}`);
  else call('read', c, `SELECT k, v FROM soak_kv WHERE k >= ${KEYBASE} ORDER BY k LIMIT 50`);
}

export function read_fresh() {
  const resume = __ITER % 2 === 1;
  // A new client each call: the extension dials per call with fresh; resumption needs the
  // session cache of the client that is kept, so two clients per VU.
  const c = get(resume ? 'fresh-resume' : 'fresh', () =>
    client({ fresh: true, ext: true, resume, zeroRtt: resume && CLIENT === 'h3' }));
  call('read_fresh', c, 'SELECT 1');
}

export function write() {
  const c = get('write', () => client());
  call('write', c, `REPLACE INTO soak_kv (k, v, note) VALUES (${key(__ITER)}, ${__ITER}, 'w${__VU}-${__ITER}')`);
}

export function txn() {
  const c = get('txn', () => client({ session: true }));
  const a = key(__ITER), b = key(__ITER + 50);
  const ok = c.txn(['BEGIN', `UPDATE soak_kv SET v = v + 1 WHERE k = ${a}`,
    `INSERT INTO soak_kv (k, v, note) VALUES (${b}, 1, 'txn') ON DUPLICATE KEY UPDATE v = v + 1`, 'COMMIT']);
  record('txn', ok, lastResult().ms);
}

const CODECS = ['gzip', 'zstd', 'snappy', 's2'];
const PAD = 'the quick brown fox jumps over the lazy dog '.repeat(48); // ~2 KiB
export function compressed() {
  const codec = CODECS[__ITER % CODECS.length];
  const c = get(`compressed-${codec}`, () => client({ codec }));
  if (Math.floor(__ITER / CODECS.length) % 2 === 0) {
    const r = call('compressed', c, "SELECT seq, REPEAT('lorem ipsum dolor ', 10) FROM seq_1_to_200");
    if (!r.error && r.encoding) encoded.add(1);
  } else {
    call('compressed', c, `REPLACE INTO soak_kv (k, v, note) VALUES (${key(__ITER)}, 0, '${PAD}')`);
  }
}

export function proto() {
  const c = get('proto', () => client({ format: 'proto' }));
  if (__ITER % 2 === 0) call('proto', c, `SELECT k, v, note FROM soak_kv WHERE k >= ${KEYBASE} ORDER BY k LIMIT 20`);
  else call('proto', c, 'SELECT seq, seq * 2 FROM seq_1_to_100');
}

// --- StreamExecute, Connect streaming JSON, over k6's HTTP/2 ---
function envelope(json) {
  const out = new Uint8Array(5 + json.length);
  const n = json.length;
  out[1] = (n >>> 24) & 255; out[2] = (n >>> 16) & 255; out[3] = (n >>> 8) & 255; out[4] = n & 255;
  for (let i = 0; i < n; i++) out[5 + i] = json.charCodeAt(i); // ASCII SQL
  return out.buffer;
}
function text(bytes, from, to) {
  let s = '';
  for (let i = from; i < to; i += 8192) s += String.fromCharCode.apply(null, bytes.subarray(i, Math.min(to, i + 8192)));
  return s;
}
const STREAM_SQL = `SELECT seq, REPEAT('x', 500) FROM seq_1_to_${STREAM_ROWS}`;
const STREAM_BODY = envelope(JSON.stringify({ query: STREAM_SQL }));

export function stream() {
  const res = http.post(FERRY_URL + '/psdb.v1alpha1.Database/StreamExecute', STREAM_BODY, {
    headers: { 'content-type': 'application/connect+json', authorization: AUTH },
    responseType: 'binary', timeout: '60s',
  });
  const t = res.timings.duration;
  if (res.error) return record('stream', false, t, res.error);
  if (res.status !== 200) return record('stream', false, t, `HTTP ${res.status}`);
  if (res.proto !== 'HTTP/2.0') return record('stream', false, t, `expected HTTP/2, got ${res.proto}`);
  const b = new Uint8Array(res.body);
  let off = 0, rows = 0, msgs = 0, end = null;
  while (off + 5 <= b.length) {
    const flags = b[off], n = ((b[off + 1] << 24) >>> 0) + (b[off + 2] << 16) + (b[off + 3] << 8) + b[off + 4];
    if (off + 5 + n > b.length) return record('stream', false, t, `truncated envelope at ${off}`);
    const doc = JSON.parse(text(b, off + 5, off + 5 + n));
    off += 5 + n;
    if (flags & 2) { end = doc; break; }
    if (flags !== 0) return record('stream', false, t, `unexpected envelope flags ${flags}`);
    msgs++;
    if (doc.error) return record('stream', false, t, `error message: ${JSON.stringify(doc.error).slice(0, 200)}`);
    rows += ((doc.result && doc.result.rows) || []).length;
  }
  if (!end) return record('stream', false, t, 'no end message');
  if (end.error) return record('stream', false, t, `end error: ${JSON.stringify(end.error).slice(0, 200)}`);
  if (rows !== STREAM_ROWS) return record('stream', false, t, `${rows} rows, expected ${STREAM_ROWS}`);
  streamRows.add(rows);
  streamMessages.add(msgs);
  record('stream', true, t);
}
