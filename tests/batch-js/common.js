// What the suites share: the server (env), the helper, unique table names. Not a test
// file (node --test runs *.test.js). The dev CA reaches Node's fetch through
// NODE_EXTRA_CA_CERTS (`npm test` sets it from FERRY_CA).
import { FerryBatch } from '../../clients/js/ferry-batch.js'

export const FERRY_URL = process.env.FERRY_URL ?? 'https://127.0.0.1:48543'
export const user = process.env.FERRY_USER ?? 'ferry'
export const password = process.env.FERRY_PASSWORD ?? 'ferry'
export const ca = process.env.FERRY_CA || undefined

const base = new URL(FERRY_URL)
/** The URL with the credentials in it, as @planetscale/database and FerryBatch take it. */
export const url = `${base.protocol}//${encodeURIComponent(user)}:${encodeURIComponent(password)}@${base.host}`

export const connect = () => new FerryBatch({ url })

/** A table name of its own for this run: batchjs_<random>_<what>. */
const run = Math.random().toString(36).slice(2, 8)
export const tableName = (what) => `batchjs_${run}_${what}`

/** CREATE TABLE (utf8mb4: the dev server's default is latin1) through a pipeline; the
 * answers must have no error. */
export async function createTable (db, name, columns) {
  const { results } = await db.pipeline([`DROP TABLE IF EXISTS ${name}`,
    `CREATE TABLE ${name} (${columns}) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`])
  for (const r of results) if (r.error) throw new Error(`${r.statement}: ${r.error.code} ${r.error.message}`)
}

export async function dropTables (db, names) {
  await db.pipeline(names.map((n) => `DROP TABLE IF EXISTS ${n}`))
}

/** The one result of a one-statement pipeline; throws its error. */
export async function one (db, query, args) {
  const { results: [r] } = await db.pipeline([{ query, args }])
  if (r.error) throw new Error(`${query}: ${r.error.code} ${r.error.message}`)
  return r
}
