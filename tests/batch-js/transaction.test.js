// transaction(): BEGIN, the statements, COMMIT in one request; the first error rolls
// everything back and is thrown naming the statement.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { FerryBatchError } from '../../clients/js/ferry-batch.js'
import { Client } from '@planetscale/database'
import { connect, createTable, dropTables, one, tableName, url } from './common.js'

const db = connect()
const t = tableName('txn')

before(() => createTable(db, t, 'id INT PRIMARY KEY, v VARCHAR(20) NOT NULL'))
after(() => dropTables(db, [t]))

const count = async () => (await one(db, `SELECT COUNT(*) AS n FROM ${t}`)).rows[0].n

test('a five-statement transaction commits', async () => {
  const ins = `INSERT INTO ${t} (id, v) VALUES (?, ?)`
  const r = await db.transaction([
    { query: ins, args: [1, 'a'] },
    { query: ins, args: [2, 'b'] },
    { query: `INSERT INTO ${t} (id, v) VALUES (:id, :v)`, args: { id: 3, v: 'c' } },
    { query: `UPDATE ${t} SET v = CONCAT(v, '!') WHERE id IN ::ids`, args: { ids: [1, 2] } },
    `SELECT id, v FROM ${t} ORDER BY id`
  ])
  assert.equal(r.results.length, 5)
  assert.deepEqual(r.results.map((x) => x.error), [null, null, null, null, null])
  assert.deepEqual(r.results.map((x) => x.rowsAffected), [1, 1, 1, 2, 0])
  assert.deepEqual(r.results[4].rows, [{ id: 1, v: 'a!' }, { id: 2, v: 'b!' }, { id: 3, v: 'c' }])
  assert.ok(r.time >= 0)
  // Committed: another connection (a new session) sees the rows.
  assert.equal((await one(connect(), `SELECT COUNT(*) AS n FROM ${t}`)).rows[0].n, '3')
  assert.equal(db.session?.vitessSession?.inTransaction ?? false, false)
})

test('a failing third statement rolls everything back and is named', async () => {
  const before = await count()
  const ins = `INSERT INTO ${t} (id, v) VALUES (?, ?)`
  await assert.rejects(db.transaction([
    { query: ins, args: [10, 'x'] },
    { query: ins, args: [11, 'y'] },
    { query: ins, args: [10, 'dup'] }, // duplicate key
    { query: ins, args: [12, 'z'] }
  ]), (e) => {
    assert.ok(e instanceof FerryBatchError)
    assert.equal(e.index, 2)
    assert.equal(e.status, 400)
    assert.equal(e.code, 'ALREADY_EXISTS')
    assert.match(e.message, /^statement 2 failed/)
    assert.match(e.message, /Duplicate entry '10'/)
    // The statements reached: two results, then the failing one with its error.
    assert.equal(e.results.length, 3)
    assert.deepEqual(e.results.slice(0, 2).map((x) => [x.error, x.rowsAffected]), [[null, 1], [null, 1]])
    assert.equal(e.results[2].error.code, 'ALREADY_EXISTS')
    return true
  })
  assert.equal(await count(), before)
  assert.equal((await one(db, `SELECT COUNT(*) AS n FROM ${t} WHERE id >= 10`)).rows[0].n, '0')
  // The session is usable and not left in a transaction.
  assert.equal(db.session?.vitessSession?.inTransaction ?? false, false)
  const r = await db.transaction([{ query: ins, args: [20, 'after'] }])
  assert.equal(r.results[0].rowsAffected, 1)
})

test('a read-only transaction refuses a write', async () => {
  const before = await count()
  await assert.rejects(db.transaction([
    `SELECT COUNT(*) FROM ${t}`,
    { query: `INSERT INTO ${t} (id, v) VALUES (?, ?)`, args: [30, 'ro'] }
  ], { readOnly: true }), (e) => {
    assert.ok(e instanceof FerryBatchError)
    assert.equal(e.index, 1)
    assert.equal(e.code, 'FAILED_PRECONDITION') // errno 1792, as Execute answers it
    assert.match(e.message, /READ ONLY/)
    return true
  })
  assert.equal(await count(), before)
  // Reads pass.
  const r = await db.transaction([`SELECT COUNT(*) AS n FROM ${t}`], { readOnly: true })
  assert.equal(r.results[0].rows[0].n, before)
})

// The level shows in what the transaction sees while another connection commits a row
// between its two reads (the first read starts its snapshot).
async function readTwiceAroundAnInsert (id, options) {
  const other = connect()
  const tx = db.transaction([`SELECT COUNT(*) AS n FROM ${t}`, 'SELECT SLEEP(0.6)', `SELECT COUNT(*) AS n FROM ${t}`], options)
  await new Promise((resolve) => setTimeout(resolve, 200))
  const started = Date.now()
  await other.transaction([{ query: `INSERT INTO ${t} (id, v) VALUES (?, ?)`, args: [id, 'iso'] }])
  const insertMs = Date.now() - started
  const r = await tx
  return { first: Number(r.results[0].rows[0].n), second: Number(r.results[2].rows[0].n), insertMs }
}

test('isolation levels are applied to the transaction', async () => {
  // REPEATABLE READ (also the server's default): the snapshot does not see the new row.
  const rr = await readTwiceAroundAnInsert(100, { isolation: 'REPEATABLE READ' })
  assert.equal(rr.second, rr.first, 'REPEATABLE READ')
  const dflt = await readTwiceAroundAnInsert(101, {})
  assert.equal(dflt.second, dflt.first, 'the default level (REPEATABLE READ)')
  // READ COMMITTED: each read sees what committed before it.
  const rc = await readTwiceAroundAnInsert(102, { isolation: 'read committed' })
  assert.equal(rc.second, rc.first + 1, 'READ COMMITTED')
  // SERIALIZABLE: the reads lock what they read; the insert waits for the COMMIT.
  const ser = await readTwiceAroundAnInsert(103, { isolation: 'SERIALIZABLE' })
  assert.equal(ser.second, ser.first, 'SERIALIZABLE')
  assert.ok(ser.insertMs >= 250, `SERIALIZABLE: the insert waited ${ser.insertMs} ms`)
  assert.ok(rr.insertMs < 250 && rc.insertMs < 250, `no wait otherwise: ${rr.insertMs}, ${rc.insertMs} ms`)
  // With readOnly too.
  const ro = await db.transaction([`SELECT COUNT(*) AS n FROM ${t}`], { isolation: 'SERIALIZABLE', readOnly: true })
  assert.equal(Number(ro.results[0].rows[0].n), ser.first + 1)
  await assert.rejects(db.transaction(['SELECT 1'], { isolation: 'CHAOS' }), TypeError)
})

test('a statement that would end the transaction is refused before anything runs', async () => {
  const before = await count()
  await assert.rejects(db.transaction([
    { query: `INSERT INTO ${t} (id, v) VALUES (?, ?)`, args: [40, 'ddl'] },
    `CREATE TABLE ${tableName('never')} (id INT)`
  ]), (e) => {
    assert.ok(e instanceof FerryBatchError)
    assert.equal(e.status, 400)
    assert.equal(e.code, 'invalid_argument')
    assert.equal(e.index, null)
    assert.match(e.message, /statement 1: CREATE/)
    return true
  })
  assert.equal(await count(), before)
})

test("inside the driver's open transaction: a pipeline runs in it, a transaction batch is refused", async () => {
  const conn = new Client({ url }).connection()
  const s = connect()
  await conn.execute('BEGIN')
  try {
    await conn.execute(`INSERT INTO ${t} (id, v) VALUES (50, 'drv')`)
    s.session = conn.session
    await assert.rejects(s.transaction([`INSERT INTO ${t} (id, v) VALUES (51, 'no')`]), (e) => {
      assert.equal(e.status, 400)
      assert.equal(e.code, 'failed_precondition')
      return true
    })
    const p = await s.pipeline([`INSERT INTO ${t} (id, v) VALUES (52, 'pipe')`, `SELECT id FROM ${t} WHERE id BETWEEN 50 AND 59 ORDER BY id`])
    assert.deepEqual(p.results[1].rows, [{ id: 50 }, { id: 52 }])
    assert.equal(s.session.vitessSession.inTransaction, true)
  } finally {
    // The latest session of the two (a failed assertion must not leave the transaction open).
    if (s.session) conn.session = s.session
    await conn.execute('ROLLBACK')
  }
  assert.equal((await one(db, `SELECT COUNT(*) AS n FROM ${t} WHERE id BETWEEN 50 AND 59`)).rows[0].n, '0')
})
