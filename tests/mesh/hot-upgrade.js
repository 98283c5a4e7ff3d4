// Hot upgrade under load (issue 24), run by tests/mesh/hot-upgrade.sh: HTTP/2 (k6's own
// http) and HTTP/3 (our extension k6/x/ferry, quic-go) at once, each VU one client with one
// psdb session carried from answer to answer, as one @planetscale/database Connection does
// (Connect JSON Execute, the `session` of the previous answer sent with the next request,
// kept even from an answer with an error). Two scenarios per protocol:
// - h2 / h3 (VUS each): per iteration a plain read, a short transaction, a plain read:
//     SELECT COUNT(*) of this VU's committed rows       (must equal what it committed)
//     BEGIN                                              (inTransaction: true)
//     INSERT 3 rows into hot_upgrade                     (rowsAffected 3, in the transaction)
//     ... TXN_PAUSE_MS
//     SELECT COUNT(*) of this transaction's rows         (3, in the transaction)
//     COMMIT                                             (inTransaction: false)
//     SELECT COUNT(*) of this VU's committed rows again
// - h2_long / h3_long (LONG_VUS each): the same, but the transaction stays open LONG_MS,
//   with its SELECT repeated every LONG_STEP_MS meanwhile, and the VUs start staggered by
//   LONG_MS / LONG_VUS: at any moment some pinned session is open, and one that was open
//   before a swap sends statements through the old filter and then the new one. Each long
//   transaction is logged: `HOTUPGRADE-TXN <proto> <INSERT answered, ms> <COMMIT sent, ms>
//   <statements>` (the script counts those open across each whole swap). A long
//   transaction ends early enough to commit before DURATION_S is over; a long VU with
//   less than 1.5 s left runs a short one.
// Every request is checked: HTTP 200 over the scenario's protocol, an answer that parses,
// no `error` in it, and the step's own expectation; over HTTP/2 also that every statement
// of a transaction was answered by the same shim (ferry-shim-instance). A failed step fails
// the transaction (the rest is skipped, then ROLLBACK, as the driver's transaction() does).
// Every failure is one log line `HOTUPGRADE-FAIL {json}` with its time, protocol, VU,
// step, error and the answer's start. Counters per protocol: requests_h2/h3 (every request
// sent), failures_h2/h3, txns_h2/h3 (transactions committed and checked), and latency_h2/h3
// (ms, every answered request); thresholds make
// k6 exit non-zero on any failure or on a protocol that sent nothing.
//
// Environment: FERRY_URL (https://host:port), CA (the dev CA, PEM; k6's http needs
// SSL_CERT_FILE=$CA too), RUN_ID (rows of this run), VUS (8), LONG_VUS (4), DURATION_S (20),
// TXN_PAUSE_MS (50), LONG_MS (8000), LONG_STEP_MS (250), DB_USER/DB_PASSWORD (ferry/ferry),
// SUMMARY (file for the JSON summary).
import http from 'k6/http';
import ferry from 'k6/x/ferry';
import encoding from 'k6/encoding';
import { Counter, Trend } from 'k6/metrics';
import { sleep } from 'k6';
import exec from 'k6/execution';

const E = __ENV;
const URL = E.FERRY_URL || 'https://127.0.0.1:18470';
const EXECUTE = URL + '/psdb.v1alpha1.Database/Execute';
const USER = E.DB_USER || 'ferry', PASSWORD = E.DB_PASSWORD || 'ferry';
const AUTH = 'Basic ' + encoding.b64encode(`${USER}:${PASSWORD}`);
const RUN = E.RUN_ID || 'manual';
const VUS = Number(E.VUS || 8);
const DURATION_S = Number(E.DURATION_S || 20);
const DURATION = `${DURATION_S}s`;
const PAUSE = Number(E.TXN_PAUSE_MS || 50) / 1000;
const LONG_VUS = Number(E.LONG_VUS || 4);
const LONG_MS = Number(E.LONG_MS || 8000);
const LONG_STEP = Number(E.LONG_STEP_MS || 250) / 1000;
const ROWS = 3;
const TABLE = 'hot_upgrade';

if (!/^[A-Za-z0-9_-]{1,40}$/.test(RUN)) throw new Error(`RUN_ID must be [A-Za-z0-9_-]{1,40}: ${RUN}`);

const requests = { h2: new Counter('requests_h2'), h3: new Counter('requests_h3') };
const failures = { h2: new Counter('failures_h2'), h3: new Counter('failures_h3') };
const txns = { h2: new Counter('txns_h2'), h3: new Counter('txns_h3') };
const latency = { h2: new Trend('latency_h2', true), h3: new Trend('latency_h3', true) }; // every answered request

export const options = {
  scenarios: {
    h2: { executor: 'constant-vus', exec: 'h2', vus: VUS, duration: DURATION },
    h3: { executor: 'constant-vus', exec: 'h3', vus: VUS, duration: DURATION },
    h2_long: { executor: 'constant-vus', exec: 'h2', vus: LONG_VUS, duration: DURATION, env: { LONG: '1' } },
    h3_long: { executor: 'constant-vus', exec: 'h3', vus: LONG_VUS, duration: DURATION, env: { LONG: '1' } },
  },
  thresholds: {
    failures_h2: ['count==0'], failures_h3: ['count==0'],
    requests_h2: ['count>0'], requests_h3: ['count>0'],
    txns_h2: ['count>0'], txns_h3: ['count>0'],
  },
  tlsVersion: { min: 'tls1.3', max: 'tls1.3' },
  discardResponseBodies: false,
  summaryTrendStats: ['min', 'p(50)', 'p(95)', 'p(99)', 'max', 'count'],
  setupTimeout: '60s',
};

// One Execute over k6's HTTP/2 client; the session is carried in `state`.
function h2call(state, sql) {
  const msg = { query: sql };
  if (state.session) msg.session = state.session;
  const res = http.post(EXECUTE, JSON.stringify(msg), {
    headers: { 'content-type': 'application/json', authorization: AUTH },
    timeout: '30s',
  });
  let error = '';
  if (res.error) error = `transport: ${res.error} (code ${res.error_code})`;
  else if (res.proto !== 'HTTP/2.0') error = `expected HTTP/2, got ${res.proto}`;
  return { status: res.status, body: res.body || '', error, shim: res.headers['Ferry-Shim-Instance'] || '', ms: res.timings.duration };
}

// One Execute over our HTTP/3 client (it carries the session itself: session: true).
function h3call(c, sql) {
  const r = c.execute(sql);
  let error = '';
  // The extension's error covers transport failures, non-200 answers and a psdb `error`;
  // the checks below repeat the last two on the answer itself.
  if (r.error) error = r.error;
  else if (r.proto !== 'h3') error = `expected h3, got ${r.proto}`;
  return { status: r.status, body: r.body || '', error, shim: '', ms: r.ms };
}

// Per VU: its protocol's client, and the rows it has committed so far.
let vuState;
function state(proto) {
  if (!vuState || vuState.proto !== proto) {
    vuState = { proto, committed: 0, session: null };
    if (proto === 'h3') {
      const c = ferry.client({
        url: URL, proto: 'h3', ca: E.CA || '', user: USER, password: PASSWORD,
        session: true, timeoutSeconds: 30,
      });
      vuState.call = (sql) => h3call(c, sql);
    } else {
      vuState.call = (sql) => {
        const r = h2call(vuState, sql);
        // As the driver: keep the answer's session whenever it has one (errors included).
        try { const a = JSON.parse(r.body); if (a && a.session) vuState.session = a.session; } catch (_) { /* checked below */ }
        return r;
      };
    }
    failures[proto].add(0); // the metrics exist (thresholds) even when nothing fails
    txns[proto].add(0);
  }
  return vuState;
}

function fail(s, step, msg, body) {
  failures[s.proto].add(1);
  console.error('HOTUPGRADE-FAIL ' + JSON.stringify({
    t: new Date().toISOString(), proto: s.proto, vu: __VU, iter: __ITER, step, error: msg,
    body: (body || '').slice(0, 300),
  }));
}

// run: one request, checked. want(answer) returns '' or what is wrong. Returns the
// parsed answer, or null after counting a failure.
function run(s, step, sql, want) {
  requests[s.proto].add(1);
  const r = s.call(sql);
  if (r.status) latency[s.proto].add(r.ms);
  let a = null, err = r.error;
  if (!err && r.status !== 200) err = `HTTP ${r.status}`;
  if (!err) {
    try { a = JSON.parse(r.body); } catch (e) { err = `unparsable answer: ${e}`; }
  }
  if (!err && (a === null || typeof a !== 'object')) err = 'answer is not an object';
  if (!err && a.error) err = `psdb error: ${JSON.stringify(a.error)}`;
  if (!err && want) err = want(a);
  if (err) { fail(s, step, err, r.body); return null; }
  a.shim = r.shim;
  return a;
}

const inTxn = (a) => !!(a.session && a.session.vitessSession && a.session.vitessSession.inTransaction);

// The single value of a one-row, one-column answer, as a string.
function scalar(a) {
  const rows = a.result && a.result.rows;
  if (!rows || rows.length !== 1 || !rows[0].values) return null;
  return encoding.b64decode(rows[0].values, 'std', 's');
}

function countIs(n) {
  return (a) => { const v = scalar(a); return v === String(n) ? '' : `row count ${v}, expected ${n}`; };
}

function read(s) {
  run(s, 'read', `SELECT COUNT(*) FROM ${TABLE} WHERE run = '${RUN}' AND proto = '${s.proto}' AND vu = ${__VU}`,
    (a) => {
      if (inTxn(a)) return 'a plain read ran inside a transaction';
      const v = scalar(a), want = String(s.committed * ROWS);
      if (v === want) return '';
      if (v !== null && /^[0-9]+$/.test(v)) s.committed = Number(v) / ROWS; // report a drift once
      return `committed rows ${v}, expected ${want}`;
    });
}

function txn(s, long) {
  const where = `run = '${RUN}' AND proto = '${s.proto}' AND vu = ${__VU} AND iter = ${__ITER}`;
  const values = Array.from({ length: ROWS }, (_, n) => `('${RUN}', '${s.proto}', ${__VU}, ${__ITER}, ${n})`).join(', ');
  const shims = [];
  let begun = 0, commitSent = 0;
  // Short: one pause, one SELECT. Long: the SELECT every LONG_STEP until LONG_MS is over.
  const inside = (select) => {
    if (!long) { sleep(PAUSE); return select(); }
    const end = Math.min(Date.now() + LONG_MS, scenarioEnd() - 500);
    do { sleep(LONG_STEP); if (!select()) return false; } while (Date.now() < end);
    return true;
  };
  const step = (name, sql, want) => {
    const a = run(s, name, sql, want);
    if (a) shims.push(a.shim);
    return a;
  };
  const ok = step('begin', 'BEGIN', (a) => inTxn(a) ? '' : 'BEGIN answered without an open transaction')
    && step('insert', `INSERT INTO ${TABLE} (run, proto, vu, iter, n) VALUES ${values}`, (a) => {
      if (!inTxn(a)) return 'INSERT answered outside the transaction';
      return a.result && a.result.rowsAffected === String(ROWS) ? '' : `rowsAffected ${a.result && a.result.rowsAffected}, expected ${ROWS}`;
    })
    && (begun = Date.now(), true)
    && inside(() => step('select', `SELECT COUNT(*) FROM ${TABLE} WHERE ${where}`,
      (a) => inTxn(a) ? countIs(ROWS)(a) : 'SELECT answered outside the transaction'))
    && (commitSent = Date.now(), true)
    && step('commit', 'COMMIT', (a) => inTxn(a) ? 'COMMIT answered with the transaction still open' : '');
  if (long && commitSent) console.log(`HOTUPGRADE-TXN ${s.proto} ${begun} ${commitSent} ${shims.length}`);
  if (!ok) {
    // As @planetscale/database's transaction() on a throw; a failure here is counted too.
    run(s, 'rollback', 'ROLLBACK', null);
    return;
  }
  if (s.proto === 'h2' && (new Set(shims).size !== 1 || !shims[0])) {
    fail(s, 'affinity', `the transaction's statements were answered by shims ${JSON.stringify(shims)}`, '');
    s.committed += 1; // it did commit
    return;
  }
  s.committed += 1;
  txns[s.proto].add(1);
}

const scenarioEnd = () => exec.scenario.startTime + DURATION_S * 1000;

function iteration(proto) {
  const s = state(proto);
  const long = __ENV.LONG === '1'; // the scenario's own env (not the init-time object)
  if (long && !s.staggered) {
    s.staggered = true;
    sleep(((exec.vu.idInTest % LONG_VUS) * LONG_MS) / LONG_VUS / 1000);
  }
  read(s);
  txn(s, long && Date.now() + 1500 < scenarioEnd());
  read(s);
}

export function h2() { iteration('h2'); }
export function h3() { iteration('h3'); }

export function setup() {
  const s = { proto: 'h2', session: null };
  s.call = (sql) => h2call(s, sql);
  requests.h2.add(1);
  const r = s.call(`CREATE TABLE IF NOT EXISTS ${TABLE} (run VARCHAR(40) NOT NULL, proto CHAR(2) NOT NULL,
    vu INT NOT NULL, iter INT NOT NULL, n INT NOT NULL, PRIMARY KEY (run, proto, vu, iter, n)) ENGINE=InnoDB`);
  if (r.error || r.status !== 200 || r.body.indexOf('"error"') >= 0) {
    throw new Error(`setup: CREATE TABLE failed: ${r.error || r.status} ${r.body.slice(0, 300)}`);
  }
}

export function handleSummary(data) {
  const m = data.metrics, n = (k) => (m[k] ? m[k].values.count : 0);
  const lat = (p) => (m[`latency_${p}`] ? { p50: m[`latency_${p}`].values['p(50)'], p99: m[`latency_${p}`].values['p(99)'], max: m[`latency_${p}`].values.max } : {});
  const doc = {
    run: RUN, durationMs: data.state.testRunDurationMs,
    h2: { requests: n('requests_h2'), failures: n('failures_h2'), txns: n('txns_h2'), latencyMs: lat('h2') },
    h3: { requests: n('requests_h3'), failures: n('failures_h3'), txns: n('txns_h3'), latencyMs: lat('h3') },
    thresholdsFailed: Object.entries(m).filter(([, v]) => v.thresholds && Object.values(v.thresholds).some((t) => !t.ok)).map(([k]) => k),
    metrics: m,
  };
  const line = `k6: h2 ${doc.h2.requests} requests (${doc.h2.txns} transactions, ${doc.h2.failures} failed), ` +
    `h3 ${doc.h3.requests} requests (${doc.h3.txns} transactions, ${doc.h3.failures} failed), ${(doc.durationMs / 1000).toFixed(1)} s\n`;
  return E.SUMMARY ? { [E.SUMMARY]: JSON.stringify(doc), stdout: line } : { stdout: line };
}
