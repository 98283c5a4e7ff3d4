// Checks a Grafana dashboard (observability/grafana/*.json).
//
//   node check.mjs schema DASHBOARD
//     Against Grafana's own dashboard schema: the Grafana Foundation SDK's generated
//     types (dashboard, timeseries panel, Prometheus query), strictly. The dashboard
//     becomes one TypeScript object literal typed with them and tsc checks it: a
//     missing required field, a wrong type, an enum value Grafana does not have, or any
//     key the schema does not know (excess property check) fails. Then a copy with one
//     unknown key must fail, so the check cannot pass vacuously.
//
//   node check.mjs metrics DASHBOARD URL...
//     Every query of the dashboard is parsed with Prometheus' own PromQL grammar
//     (@prometheus-io/lezer-promql), after putting a value in for each dashboard
//     variable; every metric it selects must be in one of the scrapes at URL... (Envoy
//     admin /stats/prometheus, the shims' /metrics), with every label it matches on.
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parser } from "@prometheus-io/lezer-promql";

const here = dirname(fileURLToPath(import.meta.url));
const [mode, file, ...urls] = process.argv.slice(2);
if (!file || !["schema", "metrics"].includes(mode)) {
  console.error("usage: node check.mjs schema DASHBOARD | metrics DASHBOARD URL...");
  process.exit(2);
}
const dashboard = JSON.parse(readFileSync(file, "utf8"));

// --- schema -------------------------------------------------------------------------
// J<T>: the JSON form of an SDK type: enums as their values (`${E}`: "query", ...;
// numeric enums take their numbers as they are), no methods (the SDK's
// `_implementsDataqueryVariant` marker). Panels are typed by their plugin (options,
// fieldConfig.defaults.custom) and their queries as Prometheus queries; the SDK leaves
// those open (`any`, a variant) in the generic Panel.
const PRELUDE = `
import * as dashboard from "@grafana/grafana-foundation-sdk/dashboard";
import * as prometheus from "@grafana/grafana-foundation-sdk/prometheus";
import * as timeseries from "@grafana/grafana-foundation-sdk/timeseries";
type J<T> = unknown extends T ? T
  : T extends string ? \`\${T}\`
  : T extends number | boolean | null | undefined ? T
  : T extends readonly (infer U)[] ? J<U>[]
  : T extends object ? { [K in keyof T as T[K] extends (...a: any[]) => any ? never : K]: J<T[K]> }
  : T;
type FieldConfigOf<C> = Omit<J<dashboard.FieldConfigSource>, "defaults"> & {
  defaults: Omit<J<dashboard.FieldConfig>, "custom"> & { custom?: J<C> };
};
type Queries = { targets?: J<prometheus.dataquery>[] };
type Common = Omit<J<dashboard.Panel>, "type" | "targets" | "options" | "fieldConfig"> & Queries;
type TimeseriesPanel = Common & {
  type: "timeseries";
  options: J<timeseries.Options>;
  fieldConfig: FieldConfigOf<timeseries.FieldConfig>;
};
type AnyPanel = TimeseriesPanel;
type Row = Omit<J<dashboard.RowPanel>, "panels"> & { panels: AnyPanel[] };
type Dashboard = Omit<J<dashboard.Dashboard>, "panels"> & { panels: (AnyPanel | Row)[] };
`;

function typecheck(name, value) {
  const gen = join(here, ".gen");
  mkdirSync(gen, { recursive: true });
  writeFileSync(join(gen, `${name}.ts`), `${PRELUDE}\nexport const dashboardJson: Dashboard = ${JSON.stringify(value, null, 2)};\n`);
  const tsc = join(here, "node_modules", "typescript", "bin", "tsc");
  try {
    execFileSync(process.execPath, [tsc, "--noEmit", "--strict", "--target", "es2022", "--module", "nodenext",
      "--moduleResolution", "nodenext", "--skipLibCheck", join(gen, `${name}.ts`)], { cwd: here, encoding: "utf8" });
    return "";
  } catch (e) {
    return (e.stdout || "") + (e.stderr || "") || String(e);
  }
}

if (mode === "schema") {
  const errors = typecheck("dashboard", dashboard);
  if (errors) {
    console.error(`${file}: does not match Grafana's dashboard schema:\n${errors}`);
    process.exit(1);
  }
  // The same check must reject an unknown key deep inside (and at the top).
  const bad = structuredClone(dashboard);
  const firstPanel = bad.panels.flatMap((p) => (p.type === "row" ? p.panels : [p]))[0] ?? bad.panels[0];
  firstPanel.options = { ...firstPanel.options, notAGrafanaOption: true };
  const badErrors = typecheck("mutated", bad);
  if (!/notAGrafanaOption/.test(badErrors)) {
    console.error(`the schema check accepted an unknown panel option:\n${badErrors}`);
    process.exit(1);
  }
  const panels = dashboard.panels.flatMap((p) => (p.type === "row" ? [p, ...p.panels] : [p]));
  console.log(`valid: ${file} (Grafana dashboard schema, schemaVersion ${dashboard.schemaVersion}: ` +
    `${panels.filter((p) => p.type !== "row").length} panels, ${dashboard.templating.list.length} variables)`);
  process.exit(0);
}

// --- metrics ------------------------------------------------------------------------
// A value for each variable, so the query parses as Grafana would send it.
const values = { __rate_interval: "5m", __interval: "1m", __range: "1h" };
for (const v of dashboard.templating?.list ?? []) {
  values[v.name] = v.type === "custom" || v.type === "datasource"
    ? String(v.current?.value ?? "")
    : (v.allValue ?? ".*");
}
function expand(expr) {
  return expr.replace(/\$(?:\{(\w+)(?::\w+)?\}|(\w+))/g, (m, a, b) => {
    const name = a ?? b;
    if (!(name in values)) throw new Error(`unknown variable ${m} in: ${expr}`);
    return values[name];
  });
}

// name -> set of label names seen on it (every scrape together).
const seen = new Map();
for (const url of urls) {
  const res = await fetch(url);
  if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`);
  let n = 0;
  for (const line of (await res.text()).split("\n")) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s/.exec(line);
    if (!m) continue;
    n++;
    const labels = seen.get(m[1]) ?? new Set();
    for (const l of (m[3] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="/g)) labels.add(l[1]);
    seen.set(m[1], labels);
  }
  console.log(`scraped ${url}: ${n} samples`);
}

const problems = [];
const used = new Set();
function walk(expr, where) {
  const text = expand(expr);
  const tree = parser.parse(text);
  const c = tree.cursor();
  do {
    if (c.type.isError) problems.push(`${where}: PromQL syntax error at ${c.from} in: ${text}`);
    if (c.name !== "VectorSelector") continue;
    const node = c.node;
    const id = node.getChild("Identifier");
    if (!id) continue;
    const name = text.slice(id.from, id.to);
    used.add(name);
    if (!seen.has(name)) {
      problems.push(`${where}: ${name} is in no scrape`);
      continue;
    }
    for (const m of node.getChild("LabelMatchers")?.getChildren("UnquotedLabelMatcher") ?? []) {
      const ln = m.getChild("LabelName");
      const label = ln && text.slice(ln.from, ln.to);
      if (label && !seen.get(name).has(label)) problems.push(`${where}: ${name} has no label ${label}`);
    }
  } while (c.next());
}
for (const p of dashboard.panels.flatMap((p) => (p.type === "row" ? p.panels : [p]))) {
  for (const t of p.targets ?? []) walk(t.expr, `panel "${p.title}" ${t.refId}`);
}
for (const v of dashboard.templating?.list ?? []) {
  const q = typeof v.query === "object" ? v.query.query : null;
  const m = q && /^label_values\((\w+),\s*(\w+)\)$/.exec(q);
  if (!m) continue;
  used.add(m[1]);
  if (!seen.get(m[1])?.has(m[2])) problems.push(`variable ${v.name}: no ${m[1]} with label ${m[2]} in any scrape`);
}
if (problems.length) {
  console.error(`${file}:\n  ${problems.join("\n  ")}`);
  process.exit(1);
}
console.log(`metrics: every one of the ${used.size} metrics ${file} queries is in the scrapes: ${[...used].sort().join(", ")}`);
