// Interactive transactions and session state through the real
// @planetscale/database driver, and through ORMs built on it (drizzle-orm's
// planetscale-serverless adapter, kysely-planetscale), unmodified.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Client } from '@planetscale/database'
import { drizzle } from 'drizzle-orm/planetscale-serverless'
import { mysqlTable, int, varchar } from 'drizzle-orm/mysql-core'
import { eq } from 'drizzle-orm'
import { Kysely } from 'kysely'
import { PlanetScaleDialect } from 'kysely-planetscale'
import { url, createTable, unshardedName } from './server.js'

const client = new Client({ url })

let n = 0
// On Vitess: a table of the sharded keyspace (hash(id)), so transactions span both shards.
async function table () {
  const t = `drvtx_${process.pid}_${Date.now()}_${n++}`
  await createTable(client, t, 'id INT PRIMARY KEY, name VARCHAR(20)')
  return t
}
const ids = async (t) => (await client.execute(`SELECT id FROM ${t} ORDER BY id`)).rows.map((r) => r.id)

test('transaction() commits; uncommitted rows are invisible to other connections until then', async () => {
  const t = await table()
  let seenInside
  await client.transaction(async (tx) => {
    await tx.execute(`INSERT INTO ${t} (id) VALUES (1)`)
    await tx.execute(`INSERT INTO ${t} (id) VALUES (2)`)
    seenInside = (await tx.execute(`SELECT COUNT(*) AS c FROM ${t}`)).rows[0].c
    assert.deepEqual(await ids(t), [], 'another connection sees nothing yet')
  })
  assert.equal(seenInside, '2')
  assert.deepEqual(await ids(t), [1, 2])
})

test('a throw inside transaction() rolls back', async () => {
  const t = await table()
  await assert.rejects(client.transaction(async (tx) => {
    await tx.execute(`INSERT INTO ${t} (id) VALUES (1)`)
    throw new Error('app failure')
  }), /app failure/)
  assert.deepEqual(await ids(t), [])
  // A SQL error inside also rolls back the earlier statements.
  await assert.rejects(client.transaction(async (tx) => {
    await tx.execute(`INSERT INTO ${t} (id) VALUES (5)`)
    await tx.execute(`INSERT INTO ${t} (id) VALUES (5)`) // duplicate key
  }))
  assert.deepEqual(await ids(t), [])
})

test('Promise.all inside a transaction: every statement runs in it, nothing is lost', async () => {
  const t = await table()
  await client.transaction(async (tx) => {
    await Promise.all(Array.from({ length: 25 }, (_, i) => tx.execute(`INSERT INTO ${t} (id) VALUES (${i})`)))
    assert.deepEqual(await ids(t), [], 'still uncommitted')
  })
  assert.equal((await ids(t)).length, 25)
})

test('session state lives on its connection only', async () => {
  const a = client.connection()
  const b = client.connection()
  // Vitess has temporary tables in an unsharded keyspace only.
  const tmp = unshardedName('drv_tmp')
  await a.execute('SET @ferry_v = 42')
  await a.execute(`CREATE TEMPORARY TABLE ${tmp} (x INT)`)
  await a.execute(`INSERT INTO ${tmp} VALUES (1)`)
  assert.deepEqual((await a.execute('SELECT @ferry_v AS v')).rows, [{ v: '42' }])
  assert.deepEqual((await a.execute(`SELECT COUNT(*) AS c FROM ${tmp}`)).rows, [{ c: '1' }])
  assert.deepEqual((await b.execute('SELECT @ferry_v AS v')).rows, [{ v: null }])
  await assert.rejects(b.execute(`SELECT * FROM ${tmp}`), /doesn't exist/)
  assert.deepEqual((await client.execute('SELECT @ferry_v AS v')).rows, [{ v: null }])
})

test('serverless clients that SET things never lock each other out (40 connections, 20 at once)', async () => {
  // The driver has no close(): a function that sets state and ends must not hold a
  // MySQL connection. Variables and settings travel in the session instead.
  const one = async (i) => {
    const c = client.connection()
    await c.execute('SET @x = ?', [i])
    await c.execute(`SET time_zone = '+0${i % 10}:00'`)
    const { rows } = await c.execute('SELECT @x AS x, @@time_zone AS tz')
    assert.deepEqual(rows, [{ x: String(i), tz: `+0${i % 10}:00` }], `client ${i}`)
  }
  for (let i = 0; i < 20; i++) await one(i)
  await Promise.all(Array.from({ length: 20 }, (_, i) => one(20 + i)))
  assert.deepEqual((await client.execute('SELECT @x AS x')).rows, [{ x: null }])
})

test('drizzle-orm (planetscale-serverless) transactions run unchanged', async () => {
  const t = await table()
  const items = mysqlTable(t, { id: int('id').primaryKey(), name: varchar('name', { length: 20 }) })
  const db = drizzle({ client })
  await db.transaction(async (tx) => {
    await tx.insert(items).values({ id: 1, name: 'one' })
    await tx.update(items).set({ name: 'uno' }).where(eq(items.id, 1))
  })
  assert.deepEqual(await db.select().from(items), [{ id: 1, name: 'uno' }])
  await assert.rejects(db.transaction(async (tx) => {
    await tx.insert(items).values({ id: 2, name: 'two' })
    tx.rollback()
  }))
  assert.deepEqual(await ids(t), [1])
})

test('kysely-planetscale transactions run unchanged', async () => {
  const t = await table()
  const db = new Kysely({ dialect: new PlanetScaleDialect({ url }) })
  await db.transaction().execute(async (trx) => {
    await trx.insertInto(t).values({ id: 1, name: 'k' }).execute()
    const inside = await trx.selectFrom(t).selectAll().execute()
    assert.equal(inside.length, 1)
  })
  await assert.rejects(db.transaction().execute(async (trx) => {
    await trx.insertInto(t).values({ id: 2, name: 'k2' }).execute()
    throw new Error('kysely rollback')
  }), /kysely rollback/)
  assert.deepEqual(await ids(t), [1])
  await db.destroy()
})
