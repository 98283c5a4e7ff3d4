// What the suites share about the server behind the gateway: MariaDB (the default),
// MySQL 8 (types.test.js tells it by VERSION()), or Vitess (FERRY_DRIVER_VITESS=1,
// set by tests/vitess-clients.sh: vtgate in front of the sharded keyspace `ferry`,
// scripts/vitess.sh). Not a test file (node --test runs *.test.js only).
//
// On Vitess a table of the sharded keyspace needs a primary vindex before vtgate routes
// to it, an AUTO_INCREMENT column needs a Vitess sequence (its MySQL counters are per
// shard) and `SELECT *` works once vtgate's schema tracking has seen the table:
// createTable() does all three. Temporary tables and views exist only in an unsharded
// keyspace on Vitess: unshardedName() qualifies a name with it there.
import { Client } from '@planetscale/database'

export const host = process.env.FERRY_HOST ?? '127.0.0.1'
export const port = process.env.FERRY_PORT ?? '8443'
export const user = process.env.FERRY_MYSQL_USER ?? 'ferry'
export const password = process.env.FERRY_MYSQL_PASSWORD ?? 'ferry'
export const url = `https://${user}:${password}@${host}:${port}`

export const vitess = process.env.FERRY_DRIVER_VITESS === '1'
const unsharded = process.env.FERRY_VITESS_UNSHARDED_KEYSPACE ?? 'ferry_unsharded'

if (vitess) {
  // The Vitess expectations only make sense against vtgate: refuse anything else.
  const v = (await new Client({ url }).execute('SELECT VERSION() AS v')).rows[0].v
  if (!String(v).endsWith('-Vitess')) throw new Error(`FERRY_DRIVER_VITESS=1 but the server is ${v}`)
}

/** `name` in the unsharded keyspace on Vitess (temporary tables, views); as is elsewhere. */
export const unshardedName = (name) => (vitess ? `${unsharded}.${name}` : name)

/** An integer the server computed from literals: INT32 on MariaDB and MySQL, but vtgate
 * binds every literal as INT64 (`SELECT 1`, a recursive CTE's counter), which the driver
 * keeps as a string. */
export const literalInt = (n) => (vitess ? String(n) : n)
export const literalIntType = vitess ? 'INT64' : 'INT32'

/** The message of a missing table: vtgate's own, as it routes (no vindex, no table). */
export const missingTable = (name) => (vitess ? new RegExp(`table ${name} not found`) : /doesn't exist/)

/**
 * CREATE TABLE `name` (`columns`) `suffix`. On Vitess the table is sharded by hash(`key`);
 * with `autoIncrement` (the AUTO_INCREMENT column, which must be `key`) its values come
 * from a Vitess sequence in the unsharded keyspace, as on PlanetScale; then it waits
 * (at most 15 s) for vtgate's schema tracking to know the columns.
 */
export async function createTable (client, name, columns, { suffix = '', key = 'id', autoIncrement = false } = {}) {
  await client.execute(`CREATE TABLE ${name} (${columns}) ${suffix}`)
  if (!vitess) return
  await client.execute(`ALTER VSCHEMA ON ${name} ADD VINDEX hash(${key})`)
  if (autoIncrement) {
    const seq = `${unsharded}.${name}_seq`
    await client.execute(`CREATE TABLE ${seq} (id INT, next_id BIGINT, cache BIGINT, PRIMARY KEY (id)) COMMENT 'vitess_sequence'`)
    await client.execute(`INSERT INTO ${seq} (id, next_id, cache) VALUES (0, 1, 100)`)
    await client.execute(`ALTER VSCHEMA ADD SEQUENCE ${seq}`)
    await client.execute(`ALTER VSCHEMA ON ${name} ADD AUTO_INCREMENT ${key} USING ${seq}`)
  }
  const until = Date.now() + 15000
  for (;;) {
    try {
      await client.execute(`SELECT * FROM ${name} ORDER BY ${key} LIMIT 1`)
      return
    } catch (e) {
      if (Date.now() > until || !/VT09015|schema tracking/.test(e.message)) throw e
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  }
}
