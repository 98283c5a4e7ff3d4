// Typed bind variables round-trip, and rows read exactly as @planetscale/database reads
// them (same query through the driver and through a one-statement batch).
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Client, cast as driverCast } from '@planetscale/database'
import { FerryBatch, cast, typed } from '../../clients/js/ferry-batch.js'
import { connect, createTable, dropTables, tableName, url } from './common.js'

const db = connect()
const client = new Client({ url })
const t = tableName('types')

const COLUMNS = `id BIGINT PRIMARY KEY, i INT, ti TINYINT, u INT UNSIGNED, big BIGINT, ubig BIGINT UNSIGNED,
  d DECIMAL(20,4), f DOUBLE, fl FLOAT, s VARCHAR(100), c CHAR(3), txt TEXT, b VARBINARY(16), blb BLOB,
  dt DATETIME(3), dte DATE, tm TIME, ts TIMESTAMP NULL, j JSON, y YEAR, bit1 BIT(8), e ENUM('x','y'), n INT NULL`

before(() => createTable(db, t, COLUMNS))
after(() => dropTables(db, [t]))

const tricky = 'it\'s "quoted" \\ back\\slash; -- not a comment /* nor this */ :name ? ünï 🦀 \n\t\0 end'
const bytes = new Uint8Array([0, 1, 0x27, 0x5c, 0x22, 0x80, 0xff, 0x3f])

test('typed args round-trip', async () => {
  const insert = `INSERT INTO ${t} (id, i, ti, u, big, ubig, d, f, fl, s, c, txt, b, blb, dt, dte, tm, ts, j, y, bit1, e, n)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
  const r = await db.transaction([
    {
      query: insert,
      args: [1, -2147483648, true, 4294967295, -9223372036854775808n, 18446744073709551615n,
        typed('DECIMAL', '1234567890123456.0001'), 0.1, 1.5, tricky, 'abc', '', bytes, new Uint8Array(0),
        new Date(Date.UTC(2024, 0, 2, 3, 4, 5, 678)), '2024-02-29', '-838:59:59', '2030-01-01 00:00:00',
        { a: [1, 'x', null, true], 'k"q': 'ü' }, 2155, typed('BIT', new Uint8Array([0xa5])), 'y', null]
    },
    {
      query: `INSERT INTO ${t} (id, big, ubig, d, f, s, b, n) VALUES (:id, :big, :ubig, :d, :f, :s, :b, :n)`,
      args: { id: 2, big: 9007199254740993n, ubig: 9223372036854775808n, d: '-0.5', f: -1e300, s: '', b: bytes.buffer, n: undefined }
    },
    { query: `INSERT INTO ${t} (id, i, d, s) VALUES (?, ?, ?, ?)`, args: [3, false, 2.25, 'x'] },
    `SELECT * FROM ${t} ORDER BY id`
  ])
  assert.deepEqual(r.results.map((x) => x.rowsAffected), [1, 1, 1, 0])
  const [row1, row2, row3] = r.results[3].rows
  assert.deepEqual(row1, {
    id: '1',
    i: -2147483648,
    ti: 1,
    u: 4294967295,
    big: '-9223372036854775808',
    ubig: '18446744073709551615',
    d: '1234567890123456.0001',
    f: 0.1,
    fl: 1.5,
    s: tricky,
    c: 'abc',
    txt: '',
    b: bytes,
    blb: new Uint8Array(0),
    dt: '2024-01-02 03:04:05.678',
    dte: '2024-02-29',
    tm: '-838:59:59',
    ts: '2030-01-01 00:00:00',
    j: { a: [1, 'x', null, true], 'k"q': 'ü' },
    y: 2155,
    bit1: new Uint8Array([0xa5]),
    e: 'y',
    n: null
  })
  assert.equal(row2.big, '9007199254740993')
  assert.equal(row2.ubig, '9223372036854775808')
  assert.equal(row2.d, '-0.5000')
  assert.equal(row2.f, -1e300)
  assert.equal(row2.s, '')
  assert.deepEqual(row2.b, bytes)
  assert.equal(row2.n, null)
  assert.equal(row2.i, null)
  assert.equal(row3.i, 0)
  assert.equal(row3.d, '2.2500')
})

test('bound values come back as they went (SELECT ?)', async () => {
  const { results: [r] } = await db.pipeline([{
    query: 'SELECT ? AS i, ? AS big, ? AS s, ? AS n, :x AS x',
    args: { v1: 42, v2: -9223372036854775807n, v3: tricky, v4: null, x: typed('DECIMAL', '1.50') }
  }])
  assert.equal(r.error, null)
  assert.equal(r.rows[0].i, '42') // a LONGLONG parameter: INT64, a string as the driver reads it
  assert.equal(r.rows[0].big, '-9223372036854775807')
  assert.equal(r.rows[0].s, tricky)
  assert.equal(r.rows[0].n, null)
  assert.equal(r.rows[0].x, '1.50')
  assert.equal(r.types.x, 'DECIMAL')
})

test('bytes in an expression: CAST(? AS BINARY) or a HEXVAL', async () => {
  const { results: [r] } = await db.pipeline([{
    query: 'SELECT CAST(? AS BINARY) AS a, ? AS b, ? AS c',
    args: [bytes, typed('HEXVAL', "x'00ff27'"), typed('HEXNUM', '0x0a0b')]
  }])
  assert.equal(r.error, null)
  assert.deepEqual(r.rows, [{ a: bytes, b: new Uint8Array([0, 0xff, 0x27]), c: new Uint8Array([0x0a, 0x0b]) }])
})

test('a list binds to ::name', async () => {
  const { results: [r] } = await db.pipeline([{
    query: `SELECT id FROM ${t} WHERE id IN ::ids AND (s IN ::ss OR s IS NULL OR TRUE) ORDER BY id`,
    args: { ids: [1, 3, 99n], ss: [tricky, 'x'] }
  }])
  assert.equal(r.error, null)
  assert.deepEqual(r.rows, [{ id: '1' }, { id: '3' }])
})

// Every column type the table has, NULLs, expressions and literals of their own types.
const EQUIVALENCE = [
  `SELECT * FROM ${t} ORDER BY id`,
  `SELECT id, s, b, j FROM ${t} WHERE id = 1`,
  "SELECT 1 AS a, 1.5 AS b, 1e2 AS c, 'x' AS d, NULL AS e, CAST(1 AS UNSIGNED) AS f, X'00ff' AS g, DATE '2024-01-02' AS h, JSON_OBJECT('k', 1) AS i, 18446744073709551615 AS j, -0.0 AS k, '' AS l",
  `SELECT COUNT(*) AS n, SUM(d) AS sd, AVG(f) AS af, MAX(dt) AS mdt, GROUP_CONCAT(s ORDER BY id) AS gs FROM ${t}`,
  `SELECT * FROM ${t} WHERE id < 0`
]

test("rows, fields and counts equal the driver's for the same query", async () => {
  for (const sql of EQUIVALENCE) {
    const viaDriver = await client.execute(sql)
    const { results: [viaBatch] } = await db.pipeline([sql])
    assert.equal(viaBatch.error, null, sql)
    assert.deepEqual(viaBatch.rows, viaDriver.rows, sql)
    assert.deepEqual(viaBatch.fields, viaDriver.fields, sql)
    assert.deepEqual(viaBatch.headers, viaDriver.headers, sql)
    assert.deepEqual(viaBatch.types, viaDriver.types, sql)
    assert.equal(viaBatch.rowsAffected, viaDriver.rowsAffected, sql)
    assert.equal(viaBatch.insertId, viaDriver.insertId, sql)
    assert.equal(viaBatch.size, viaDriver.size, sql)
    assert.ok(viaDriver.rows.length > 0 || sql.includes('id < 0'), sql)
  }
  // A write: the same counts.
  const w = `UPDATE ${t} SET txt = CONCAT(COALESCE(txt, ''), '.') WHERE id IN (1, 2)`
  const viaDriver = await client.execute(w)
  const { results: [viaBatch] } = await db.pipeline([w])
  assert.equal(viaBatch.rowsAffected, viaDriver.rowsAffected)
  assert.equal(viaBatch.insertId, viaDriver.insertId)
})

test("the default cast is the driver's; the driver's cast plugs in", async () => {
  const sql = EQUIVALENCE[0]
  const viaDriver = await client.execute(sql)
  const withDriverCast = new FerryBatch({ url, cast: driverCast })
  const { results: [r] } = await withDriverCast.pipeline([sql])
  assert.deepEqual(r.rows, viaDriver.rows)
  // And a custom cast sees what the driver's sees: (field, binary string | null).
  const seen = []
  const spy = new FerryBatch({ url, cast: (field, value) => { seen.push([field.name, value]); return cast(field, value) } })
  const { results: [s] } = await spy.pipeline([`SELECT b, n FROM ${t} WHERE id = 1`])
  assert.deepEqual(seen, [['b', String.fromCharCode(...bytes)], ['n', null]])
  assert.deepEqual(s.rows, [{ b: bytes, n: null }])
})
