// Shared by every workload: the three clients behind one interface, the
// metrics the report reads, and the run options. Configured by environment:
//   CLIENT     mysql | h2 | h3        (MySQL protocol + TLS baseline, Ferry HTTP/2, Ferry HTTP/3)
//   FERRY_URL  https://host:port      MYSQL_ADDR host:port    CA  dev CA (PEM)
//   VUS, ITERATIONS (per VU) or DURATION (e.g. 10s)
//   SUMMARY    where handleSummary writes the run's JSON;  LABELS  JSON object copied into it
//   HEADERS    JSON object of extra request headers (Ferry);  COMPRESS=1  MySQL zlib compression
//   CODEC      identity | gzip | zstd | snappy | s2: Ferry sends Content-Encoding (requests of
//              1 KiB and more) and Accept-Encoding with it, and decodes the answer. Ferry over
//              HTTP/2 then goes through our extension (Go x/net/http2) instead of k6's http,
//              which decodes neither zstd nor snappy/s2, so h2 and h3 share one client code path.
//   FORMAT     json (default) | proto: Connect unary JSON or proto (proto: our extension too)
//   EXT=1      Ferry over HTTP/2 through our extension even for plain JSON, so HTTP/2 and
//              HTTP/3, JSON and proto all use the same Go client (the cost benchmark)
// (client({codec, format}) overrides CODEC / FORMAT for one client.)
import http from 'k6/http';
import ferry from 'k6/x/ferry';
import mysql from 'k6/x/ferry/mysql';
import { Trend, Counter } from 'k6/metrics';
import { b64encode } from 'k6/encoding';

const E = __ENV;
export const CLIENT = E.CLIENT || 'h2';
const FERRY_URL = E.FERRY_URL || 'https://127.0.0.1:8443';
const EXECUTE = FERRY_URL + '/psdb.v1alpha1.Database/Execute';
const AUTH = 'Basic ' + b64encode(`${E.DB_USER || 'ferry'}:${E.DB_PASSWORD || 'ferry'}`);
const HEADERS = E.HEADERS ? JSON.parse(E.HEADERS) : {};

// Our own figures: only measured calls (warm-ups excluded), same meaning for every client.
const latency = new Trend('ferry_ms', true);
const errors = new Counter('ferry_errors');
const calls = new Counter('ferry_calls');
const wireSent = new Counter('wire_sent');
const wireRecv = new Counter('wire_recv');
// Cold start: did TLS resume, and what became of HTTP/3 early data.
const resumed = new Counter('tls_resumed');
const encoded = new Counter('answers_encoded'); // the gateway compressed the answer
const pairIdentity = new Trend('pair_identity_ms', true); // paired(): the identity twin of each call
const early = { accepted: new Counter('h3_0rtt_accepted'), rejected: new Counter('h3_0rtt_rejected'), 425: new Counter('h3_0rtt_425') };

// Percentiles kept in the summary: enough points to draw each latency distribution.
const TREND_STATS = ['min', 'p(1)', 'p(5)', 'p(10)', 'p(25)', 'p(50)', 'p(75)', 'p(90)',
  'p(95)', 'p(99)', 'p(99.9)', 'max', 'avg', 'count'];

// options(vus, iterations): a scenario from VUS/ITERATIONS/DURATION, defaults given by the workload.
export function options(vus, iterations) {
  const v = Number(E.VUS || vus);
  const scenario = E.DURATION
    ? { executor: 'constant-vus', vus: v, duration: E.DURATION }
    : { executor: 'per-vu-iterations', vus: v, iterations: Number(E.ITERATIONS || iterations), maxDuration: E.MAX_DURATION || '30m' };
  return {
    scenarios: { main: scenario },
    summaryTrendStats: TREND_STATS,
    tlsVersion: { min: 'tls1.3', max: 'tls1.3' },
    discardResponseBodies: false,
    setupTimeout: '5m',
  };
}

// client(o) makes this VU's client. o: {fresh, resume, zeroRtt, ext, session}
//   fresh: a new connection per call (cold start); resume: TLS session cache;
//   zeroRtt: HTTP/3 0-RTT; ext: Ferry HTTP/2 through our extension instead of k6's http
//   (needed for fresh connections with resumption on/off, which k6's http cannot toggle);
//   session: send back each answer's psdb session, as @planetscale/database does per
//   connection (needed for transactions; MySQL keeps its one connection anyway).
// Returns {run(sql, record=true), txn(sqls)}: run(...) -> true when the call succeeded;
// txn runs the statements one request each and records them as one call (their total).
// Through our extension (h3, or h2 with ext) also batch(statements, mode, key): one
// ExecuteBatch.
export function client(o = {}) {
  if (CLIENT === 'mysql') {
    const db = mysql.client({
      addr: E.MYSQL_ADDR || '127.0.0.1:3306', ca: E.CA || '', serverName: E.SERVER_NAME || '',
      user: E.DB_USER || 'ferry', password: E.DB_PASSWORD || 'ferry', database: E.DB_NAME || 'ferry',
      fresh: !!o.fresh, resume: !!o.resume, compress: E.COMPRESS === '1',
    });
    return withTxn((sql, record = true) => note(/^\s*select/i.test(sql) ? db.query(sql) : db.exec(sql), record),
      (sql) => /^\s*select/i.test(sql) ? db.query(sql) : db.exec(sql));
  }
  const codec = o.codec || E.CODEC || '', format = o.format || E.FORMAT || 'json';
  const ext = o.ext || E.EXT === '1';
  if (CLIENT === 'h3' || (CLIENT === 'h2' && (ext || codec || format === 'proto'))) {
    const c = ferry.client({
      url: FERRY_URL, proto: CLIENT, ca: E.CA || '', serverName: E.SERVER_NAME || '',
      user: E.DB_USER || 'ferry', password: E.DB_PASSWORD || 'ferry',
      fresh: !!o.fresh, resume: !!o.resume, zeroRtt: !!o.zeroRtt, headers: HEADERS,
      session: !!o.session, codec, format,
    });
    const t = withTxn((sql, record = true) => note(c.execute(sql), record), (sql) => c.execute(sql), !!o.session);
    // batch(statements, mode, key): one ExecuteBatch (Ferry's own RPC), recorded as one call.
    t.batch = (statements, mode = 'TRANSACTION', key = '') => note(c.batch(JSON.stringify(statements), mode, key), true);
    return t;
  }
  if (CLIENT === 'h2') {
    const state = { session: o.session ? null : undefined };
    return withTxn((sql, record = true) => note(k6http(sql, state), record), (sql) => k6http(sql, state), !!o.session);
  }
  throw new Error(`CLIENT must be mysql, h2 or h3, not ${CLIENT}`);
}

// lastResult: the last call's raw result ({ms, error, encoding, ...}), for scripts that
// check more than success (compress-smoke.js); fail(msg) counts an error of the script's own.
let last = {};
export function lastResult() { return last; }
export function fail(msg) { errors.add(1); console.error(`${CLIENT}: ${msg}`); }

// paired(o) is client(o) with an identity twin (same options, codec identity, its own
// connection): run(sql) makes one call with each, in alternating order, and records the
// codec's call as usual and the twin's latency as pair_identity_ms. Both see the same
// background load, so p50 ÷ pair_identity p50 compares codecs on a shared, noisy host.
export function paired(o = {}) {
  const c = client(o), twin = client(Object.assign({}, o, { codec: 'identity' }));
  twin.run('SELECT 1', false);
  return {
    run: (sql, record = true) => {
      let ok = true;
      const runTwin = () => {
        const r = twin.run(sql, false);
        if (record && r) pairIdentity.add(lastResult().ms);
        ok = ok && r;
      };
      if (__ITER % 2 === 1) runTwin();
      ok = c.run(sql, record) && ok;
      if (__ITER % 2 === 0) runTwin();
      return ok;
    },
  };
}

// note records one extension call: latency, bytes at the socket, errors.
function note(r, record) {
  last = r;
  if (r.error) {
    errors.add(1);
    if (__ITER < 3) console.error(`${CLIENT}: ${r.error}`);
  }
  if (record) {
    calls.add(1);
    if (r.error) return false; // a failure is an error, not a latency
    latency.add(r.ms);
    wireSent.add(r.sent);
    wireRecv.add(r.recv);
    if (r.resumed) resumed.add(1);
    if (r.early) early[r.early].add(1);
    if (r.encoding) encoded.add(1);
  }
  return !r.error;
}

// withTxn adds txn(sqls) to a client: one request per statement, recorded as one call.
// For Ferry (sessions: true) every answer but the last must report the open
// transaction, or the session was not carried and the statements ran one by one.
function withTxn(run, raw, sessions = false) {
  return {
    run,
    txn: (sqls) => {
      let ms = 0, sent = 0, recv = 0, error = '';
      for (const [i, sql] of sqls.entries()) {
        const r = raw(sql);
        ms += r.ms; sent += r.sent || 0; recv += r.recv || 0;
        if (r.error) { error = r.error; break; }
        if (sessions && i < sqls.length - 1 && !/"inTransaction":\s*true/.test(r.body || '')) {
          error = `${sql} did not run in the session's transaction`;
          break;
        }
      }
      return note({ ms, sent, recv, error }, true);
    },
  };
}

// k6http is one Execute over k6's own HTTP/2 client (its bytes are k6's data_sent /
// data_received); state.session, when not undefined, carries the psdb session.
function k6http(sql, state) {
  const msg = { query: sql };
  if (state.session) msg.session = state.session;
  const res = http.post(EXECUTE, JSON.stringify(msg), {
    headers: Object.assign({ 'content-type': 'application/json', authorization: AUTH }, HEADERS),
    timeout: '120s',
  });
  let err = '';
  if (res.error) err = res.error;
  else if (res.status !== 200) err = `HTTP ${res.status}`;
  else if (res.proto !== 'HTTP/2.0') err = `expected HTTP/2, got ${res.proto}`;
  else if (res.body.indexOf('"error"') >= 0) err = `SQL error: ${res.body.slice(0, 200)}`;
  if (!err && state.session !== undefined) state.session = res.json('session');
  const t = res.timings;
  const enc = res.headers['Content-Encoding'] || '';
  return { ms: t.duration + t.connecting + t.tls_handshaking, error: err, sent: 0, recv: 0, encoding: enc, body: res.body };
}

// handleSummary writes the whole k6 summary plus our labels to $SUMMARY.
export function summary(data) {
  const doc = JSON.stringify({ labels: E.LABELS ? JSON.parse(E.LABELS) : {}, state: data.state, metrics: data.metrics });
  const m = data.metrics;
  const line = `${E.LABELS || ''} calls=${m.ferry_calls ? m.ferry_calls.values.count : 0} errors=${m.ferry_errors ? m.ferry_errors.values.count : 0} p50=${m.ferry_ms ? m.ferry_ms.values['p(50)'].toFixed(3) : '-'}ms\n`;
  return E.SUMMARY ? { [E.SUMMARY]: doc, stdout: line } : { stdout: line };
}
