// A real browser against a running Ferry gateway with CORS (envoy/browser.yaml):
// headless Chromium loads a page served over HTTPS from another origin (a small
// HTTPS server here, with the dev certificate), the page calls Execute and
// StreamExecute over gRPC-Web with connect-web, Basic auth in its own header, and
// renders the rows; the test reads what the page shows. A page from an origin the
// gateway does not allow gets nothing: the browser enforces CORS.
//
// Environment: FERRY_BROWSER_URL (the gateway), FERRY_BROWSER_PAGE_PORT (the page's
// port; the gateway must allow https://localhost:<it>), FERRY_CERT_DIR (server.pem,
// server.key of the dev CA), FERRY_MYSQL_USER / FERRY_MYSQL_PASSWORD, CHROMIUM; and, for
// a gateway that verifies tokens (envoy/tokens.yaml), FERRY_TOKEN_KEY (the PKCS#8 PEM
// its `file` provider's JWKS holds, kid file-1): the page then also calls with a token
// minted here by clients/js/ferry-token.js, and with an expired one.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash, X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer } from "node:https";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import puppeteer from "puppeteer-core";
import { mintToken } from "../../clients/js/ferry-token.js";

const here = dirname(fileURLToPath(import.meta.url));
const gateway = process.env.FERRY_BROWSER_URL ?? "https://127.0.0.1:8443";
const pagePort = Number(process.env.FERRY_BROWSER_PAGE_PORT ?? 5173);
const certDir = process.env.FERRY_CERT_DIR ?? join(here, "../../.run/certs");
const user = process.env.FERRY_MYSQL_USER || "ferry";
const password = process.env.FERRY_MYSQL_PASSWORD || "ferry";
const chromium = process.env.CHROMIUM ?? "/usr/bin/chromium";
const tokenKey = process.env.FERRY_TOKEN_KEY ? readFileSync(process.env.FERRY_TOKEN_KEY, "utf8") : null;
// The calls the page makes: six, and two with tokens.
const calls = tokenKey ? 8 : 6;

/** A token for the page, as a backend would mint it. */
function token(ttlSeconds) {
  return mintToken({
    privateKey: tokenKey,
    kid: "file-1",
    issuer: process.env.FERRY_TOKEN_ISSUER || "https://idp.ferry.invalid/file",
    audience: process.env.FERRY_TOKEN_AUDIENCE || "ferry",
    account: "app",
    subject: "browser-test",
    ttlSeconds,
  });
}

const cert = readFileSync(join(certDir, "server.pem"));
const key = readFileSync(join(certDir, "server.key"));
// Chromium trusts exactly the dev server's key (the page's and the gateway's), not
// every certificate: the SPKI pin of server.pem.
const spki = createHash("sha256")
  .update(new X509Certificate(cert).publicKey.export({ type: "spki", format: "der" }))
  .digest("base64");

let server;
let browser;

before(async () => {
  execFileSync(process.execPath, [join(here, "build.mjs")], { stdio: "inherit" });
  const files = {
    "/": ["index.html", "text/html; charset=utf-8"],
    "/page.js": ["page.js", "text/javascript; charset=utf-8"],
  };
  server = createServer({ cert, key }, (req, res) => {
    const file = files[new URL(req.url, "https://page").pathname];
    if (!file) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { "content-type": file[1] });
    res.end(readFileSync(join(here, "dist", file[0])));
  });
  await new Promise((ok) => server.listen(pagePort, "127.0.0.1", ok));
  browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    args: [
      "--headless=new",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-dev-shm-usage",
      `--ignore-certificate-errors-spki-list=${spki}`,
    ],
  });
});

after(async () => {
  await browser?.close();
  await new Promise((ok) => (server ? server.close(ok) : ok()));
});

/** Loads the page from `origin`, waits for its calls, returns what each shows. */
async function run(origin) {
  const page = await browser.newPage();
  const calls = [];
  page.on("request", (r) => {
    if (r.url().startsWith(gateway)) calls.push(r);
  });
  const logs = [];
  page.on("console", (m) => logs.push(m.text()));
  page.on("pageerror", (e) => logs.push(String(e)));
  const fragment = new URLSearchParams({ gateway, user, password });
  if (tokenKey) {
    fragment.set("token", await token(300));
    fragment.set("expiredToken", await token(-120));
  }
  await page.goto(`${origin}/#${fragment}`);
  try {
    await page.waitForSelector("body[data-done]", { timeout: 60_000 });
  } catch (e) {
    throw new Error(`the page did not finish: ${logs.join("\n")}\n${await page.content()}`, {
      cause: e,
    });
  }
  const shown = await page.$$eval("section[data-call]", (sections) =>
    Object.fromEntries(
      sections.map((s) => [
        s.dataset.call,
        {
          error: s.dataset.error ?? null,
          errorText: s.querySelector(".error")?.textContent ?? null,
          sqlError: s.dataset.sqlError ?? null,
          messages: Number(s.dataset.messages ?? 0),
          columns: [...s.querySelectorAll("thead th")].map((th) => th.textContent),
          rows: [...s.querySelectorAll("tbody tr")].map((tr) =>
            [...tr.cells].map((td) => td.textContent),
          ),
        },
      ]),
    ),
  );
  const responses = await Promise.all(
    calls.map(async (r) => ({
      method: r.method(),
      url: r.url(),
      requestType: r.headers()["content-type"] ?? null,
      responseType: r.response()?.headers()["content-type"] ?? null,
    })),
  );
  await page.close();
  return { shown, responses };
}

test("a page on an allowed origin reads rows over gRPC-Web", async () => {
  const { shown, responses } = await run(`https://localhost:${pagePort}`);

  assert.deepEqual(shown.execute.columns, ["id", "name"]);
  assert.deepEqual(shown.execute.rows, [
    ["1", "alpha"],
    ["2", "βeta ✓"],
    ["3", "NULL"],
  ]);
  assert.equal(shown.execute.error, null);

  const stream = shown.stream;
  assert.equal(stream.error, null, stream.errorText);
  assert.deepEqual(stream.columns, ["n", "label"]);
  assert.equal(stream.rows.length, 2500);
  stream.rows.forEach((row, i) => assert.deepEqual(row, [String(i + 1), `row-${i + 1}`]));
  // Fields, three chunks of rows, the session: server streaming, message by message.
  assert.ok(stream.messages >= 4, `${stream.messages} messages`);

  // Errors: the shim's (its status in gRPC-Web's trailer frame) and the Ferry filter's
  // own trailers-only answer (the status in the headers, readable thanks to CORS's
  // exposed headers).
  assert.equal(shown["wrong-password"].error, "Unauthenticated", shown["wrong-password"].errorText);
  assert.match(shown["wrong-password"].errorText, /authentication failed/);
  assert.equal(shown["stream-wrong-password"].error, "Unauthenticated");
  assert.equal(shown["no-credentials"].error, "Unauthenticated");
  assert.match(shown["no-credentials"].errorText, /authorization/i);
  assert.equal(shown["sql-error"].error, null);
  assert.match(shown["sql-error"].sqlError, /no_such_table_in_ferry/);

  // A token instead of a password: served as the account its claim maps to; an expired
  // one refused as a wrong password is (Envoy's jwt_authn, its answer made gRPC-Web).
  if (tokenKey) {
    assert.equal(shown.token.error, null, shown.token.errorText);
    assert.deepEqual(shown.token.rows, [[`${user}@localhost`, "by token"]]);
    assert.equal(shown["expired-token"].error, "Unauthenticated");
    assert.match(shown["expired-token"].errorText, /Jwt is expired/);
  }

  // What went over the wire: gRPC-Web both ways.
  const posts = responses.filter((r) => r.method === "POST");
  assert.equal(posts.length, calls);
  for (const r of posts) {
    assert.equal(r.requestType, "application/grpc-web+proto", r.url);
    assert.equal(r.responseType, "application/grpc-web+proto", r.url);
  }
});

test("a page on another origin gets nothing (CORS)", async () => {
  // Same page, same server, but https://127.0.0.1:<port> is not an allowed origin.
  const { shown, responses } = await run(`https://127.0.0.1:${pagePort}`);
  assert.equal(Object.keys(shown).length, calls);
  for (const [name, call] of Object.entries(shown)) {
    assert.notEqual(call.error, null, `${name} should fail`);
    assert.deepEqual(call.rows, [], name);
  }
  // Envoy answered the preflights without CORS headers, so the browser never sent the
  // calls themselves: nothing ran.
  assert.ok(responses.some((r) => r.method === "OPTIONS"));
  for (const r of responses.filter((r) => r.method === "POST")) {
    assert.equal(r.responseType, null, `${r.url} was answered`);
  }
});
