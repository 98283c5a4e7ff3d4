// The page the browser test loads: it calls Ferry from its own origin (so CORS
// applies) over gRPC-Web with connect-web, as a browser app would, and renders what
// it gets. Each call gets a <section data-call=NAME> with a table of rows (NULL shown
// as the text NULL), the number of messages received, or the error's code and
// message. <body data-done> is set when every call has finished.
import { createClient, ConnectError, Code } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-web";
import { Database } from "../gen/psdb/v1alpha1/database_pb.js";

const settings = new URLSearchParams(location.hash.slice(1));
const gateway = settings.get("gateway");
const basic = (user, password) => "Basic " + btoa(`${user}:${password}`);
const auth = basic(settings.get("user"), settings.get("password"));

const client = createClient(
  Database,
  createGrpcWebTransport({ baseUrl: gateway, useBinaryFormat: true }),
);

const text = new TextDecoder();

/** A vitess Row → cells: lengths (-1 = NULL) slice the one values buffer. */
function cells(row) {
  const out = [];
  let at = 0;
  for (const n of row.lengths) {
    const len = Number(n);
    if (len < 0) {
      out.push(null);
      continue;
    }
    out.push(text.decode(row.values.subarray(at, at + len)));
    at += len;
  }
  return out;
}

function section(name) {
  const s = document.createElement("section");
  s.dataset.call = name;
  const h = document.createElement("h2");
  h.textContent = name;
  s.append(h);
  document.getElementById("out").append(s);
  return s;
}

function table(s, fields, rows) {
  const t = document.createElement("table");
  const head = t.createTHead().insertRow();
  for (const f of fields) {
    const th = document.createElement("th");
    th.textContent = f.name;
    head.append(th);
  }
  const body = t.createTBody();
  for (const row of rows) {
    const tr = body.insertRow();
    for (const cell of row) {
      const td = tr.insertCell();
      td.textContent = cell === null ? "NULL" : cell;
      if (cell === null) td.className = "null";
    }
  }
  s.append(t);
}

function failure(s, err) {
  const e = ConnectError.from(err);
  s.dataset.error = Code[e.code] ?? String(e.code);
  const p = document.createElement("p");
  p.className = "error";
  p.textContent = `${s.dataset.error}: ${e.rawMessage}`;
  s.append(p);
}

async function execute(name, query, headers) {
  const s = section(name);
  try {
    const res = await client.execute({ query }, { headers });
    if (res.error) {
      s.dataset.sqlError = res.error.message;
    }
    table(s, res.result?.fields ?? [], (res.result?.rows ?? []).map(cells));
    s.dataset.messages = "1";
  } catch (err) {
    failure(s, err);
  }
}

async function streamExecute(name, query, headers) {
  const s = section(name);
  let fields = [];
  const rows = [];
  let messages = 0;
  try {
    for await (const res of client.streamExecute({ query }, { headers })) {
      messages++;
      if (res.error) s.dataset.sqlError = res.error.message;
      if (res.result?.fields.length) fields = res.result.fields;
      for (const row of res.result?.rows ?? []) rows.push(cells(row));
    }
    table(s, fields, rows);
    s.dataset.messages = String(messages);
  } catch (err) {
    failure(s, err);
  }
}

// 1..n in order (MariaDB's recursive CTEs stop at 1,000 iterations: two, crossed).
const thousand =
  "WITH RECURSIVE k(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM k WHERE n < 999) SELECT n FROM k";
const sequence = (n) =>
  `SELECT n, CONCAT('row-', n) AS label FROM (SELECT a.n * 1000 + b.n + 1 AS n FROM (${thousand}) a, (${thousand}) b) s WHERE n <= ${n} ORDER BY n`;

const withAuth = { authorization: auth };
await execute(
  "execute",
  "SELECT 1 AS id, 'alpha' AS name UNION ALL SELECT 2, 'βeta ✓' UNION ALL SELECT 3, NULL",
  withAuth,
);
await streamExecute("stream", sequence(2500), withAuth);
// The shim refuses the password: the status comes in gRPC-Web's trailer frame.
await execute("wrong-password", "SELECT 1", {
  authorization: basic(settings.get("user"), "not-the-password"),
});
await streamExecute("stream-wrong-password", "SELECT 1", {
  authorization: basic(settings.get("user"), "not-the-password"),
});
// No credentials: the Ferry filter's own trailers-only answer (status in the headers).
await execute("no-credentials", "SELECT 1", {});
// A SQL error is an answer, not a failed call.
await execute("sql-error", "SELECT * FROM no_such_table_in_ferry", withAuth);
// On a gateway that verifies tokens (envoy/tokens.yaml): a short-lived token instead of
// a password, and one that has expired.
if (settings.get("token")) {
  await execute("token", "SELECT CURRENT_USER() AS user, 'by token' AS how", {
    authorization: `Bearer ${settings.get("token")}`,
  });
  await execute("expired-token", "SELECT 1", {
    authorization: `Bearer ${settings.get("expiredToken")}`,
  });
}
document.body.dataset.done = "1";
