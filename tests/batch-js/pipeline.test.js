// pipeline(): each statement answered on its own, conditions, and the session carried
// from one call to the next (as the driver's Connection carries it).
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Client } from '@planetscale/database'
import { FerryBatch, FerryBatchError } from '../../clients/js/ferry-batch.js'
import { connect, createTable, dropTables, one, tableName, url, FERRY_URL, user } from './common.js'

const db = connect()
const t = tableName('pipe')

before(() => createTable(db, t, 'id INT PRIMARY KEY, v VARCHAR(20) NOT NULL'))
after(() => dropTables(db, [t]))

test('each statement is answered with its result or its error; conditions skip', async () => {
  const ins = `INSERT INTO ${t} (id, v) VALUES (?, ?)`
  const { results, time } = await db.pipeline([
    { query: ins, args: [1, 'a'] }, //                               0 ok
    { query: ins, args: [1, 'dup'] }, //                             1 fails
    { query: ins, args: [2, 'b'], if: { ok: 1 } }, //               2 skipped
    { query: ins, args: [3, 'c'], if: { error: 1 } }, //            3 runs
    { query: ins, args: [4, 'd'], if: { not: { ok: 0 } } }, //      4 skipped
    { query: ins, args: [5, 'e'], if: { all: [{ ok: 0 }, { error: 1 }] } }, // 5 runs
    { query: ins, args: [6, 'f'], if: { any: [{ ok: 1 }, { ok: 2 }] } }, //     6 skipped
    { query: 'SELECT * FROM no_such_table_batchjs' }, //            7 fails
    { query: `SELECT id, v FROM ${t} ORDER BY id`, if: { all: [{ ok: 3 }, { not: { ok: 7 } }] } } // 8 runs
  ])
  assert.ok(time >= 0)
  assert.equal(results.length, 9)
  assert.deepEqual(results.map((r) => r.skipped), [false, false, true, false, true, false, true, false, false])
  assert.deepEqual(results.map((r) => r.error?.code ?? null),
    [null, 'ALREADY_EXISTS', null, null, null, null, null, 'NOT_FOUND', null])
  assert.match(results[1].error.message, /Duplicate entry '1'/)
  assert.match(results[7].error.message, /doesn't exist/)
  assert.deepEqual(results.map((r) => r.rowsAffected), [1, 0, 0, 1, 0, 1, 0, 0, 0])
  assert.deepEqual(results[8].rows, [{ id: 1, v: 'a' }, { id: 3, v: 'c' }, { id: 5, v: 'e' }])
  assert.deepEqual(results[8].headers, ['id', 'v'])
  assert.deepEqual(results[2].rows, [])
  // No transaction: what succeeded stays.
  assert.equal((await one(connect(), `SELECT COUNT(*) AS n FROM ${t}`)).rows[0].n, '3')
})

test('insertId and rowsAffected as the driver gives them', async () => {
  const a = tableName('auto')
  await createTable(db, a, 'id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT')
  try {
    const { results } = await db.pipeline([
      { query: `INSERT INTO ${a} (v) VALUES (?), (?)`, args: [1, 2] },
      { query: `UPDATE ${a} SET v = v + 1` },
      'SELECT LAST_INSERT_ID() AS id'
    ])
    assert.equal(results[0].insertId, '1')
    assert.equal(results[0].rowsAffected, 2)
    assert.equal(results[1].rowsAffected, 2)
    assert.equal(results[1].insertId, '0')
    assert.deepEqual(results[2].rows, [{ id: '1' }])
  } finally {
    await dropTables(db, [a])
  }
})

test('the session carries from one call to the next', async () => {
  const s = connect()
  assert.equal(s.session, null)
  const first = await s.pipeline(['SET @x = 1', "SET @y = 'two'"])
  assert.deepEqual(first.results.map((r) => r.error), [null, null])
  assert.ok(s.session && typeof s.session === 'object')
  const second = await s.pipeline(['SELECT @x AS x, @y AS y'])
  assert.deepEqual(second.results[0].rows, [{ x: '1', y: 'two' }])
  // ... into a transaction too, and after it.
  const third = await s.transaction(['SET @x = @x + 1', 'SELECT @x AS x'])
  assert.deepEqual(third.results[1].rows, [{ x: '2' }])
  assert.deepEqual((await s.pipeline(['SELECT @x AS x'])).results[0].rows, [{ x: '2' }])
  // A session survives a failed transaction (the error's answer carries it).
  await assert.rejects(s.transaction(['SET @x = 10', 'SELECT * FROM no_such_table_batchjs']), FerryBatchError)
  // User variables are not transactional (MySQL): the SET stays though the batch rolled back.
  assert.deepEqual((await s.pipeline(['SELECT @x AS x'])).results[0].rows, [{ x: '10' }])
  // Another instance has a session of its own.
  assert.deepEqual((await connect().pipeline(['SELECT @x AS x'])).results[0].rows, [{ x: null }])
})

test('calls on one instance run in order, each with the previous session', async () => {
  const s = connect()
  const calls = []
  for (let i = 1; i <= 5; i++) calls.push(s.pipeline([`SET @n = COALESCE(@n, 0) + ${i}`, 'SELECT CAST(@n AS CHAR) AS n']))
  const answers = await Promise.all(calls)
  assert.deepEqual(answers.map((a) => a.results[1].rows[0].n), ['1', '3', '6', '10', '15'])
})

test("the session is the driver's: one hands it to the other", async () => {
  const conn = new Client({ url }).connection()
  await conn.execute('SET @shared = 42')
  const s = connect()
  s.session = conn.session
  const r = await s.pipeline(['SELECT @shared AS v', 'SET @back = 7'])
  assert.deepEqual(r.results[0].rows, [{ v: '42' }])
  conn.session = s.session
  assert.deepEqual((await conn.execute('SELECT @back AS b')).rows, [{ b: '7' }])
})

test('errors: bad credentials (401), bad input (TypeError, nothing sent)', async () => {
  const base = new URL(FERRY_URL)
  const bad = new FerryBatch({ host: base.host, username: user, password: 'wrong-password' })
  await assert.rejects(bad.pipeline(['SELECT 1']), (e) => {
    assert.ok(e instanceof FerryBatchError)
    assert.equal(e.status, 401)
    assert.equal(e.code, 'unauthenticated')
    return true
  })
  await assert.rejects(db.pipeline([]), TypeError)
  await assert.rejects(db.pipeline([{ query: 'SELECT 1', if: { ok: 0 } }]), TypeError) // not earlier
  await assert.rejects(db.transaction(['SELECT 1', { query: 'SELECT 2', if: { ok: 0 } }]), TypeError)
  await assert.rejects(db.pipeline([{ query: 'SELECT ?', args: [[1, 2]] }]), TypeError)
  await assert.rejects(db.pipeline([{ query: 'SELECT ?', args: [NaN] }]), TypeError)
})

test('a bind variable the statement does not use is that statement\'s error', async () => {
  const { results } = await db.pipeline([
    { query: 'SELECT :a AS a', args: { a: 1, b: 2 } },
    { query: 'SELECT ? AS a', args: [] },
    { query: 'SELECT :a AS a', args: { a: 5 } }
  ])
  assert.match(results[0].error?.message ?? '', /"b"/)
  assert.ok(results[1].error, 'a missing bind variable is an error')
  assert.deepEqual(results[2].rows, [{ a: '5' }])
})
