// The real @planetscale/database driver (Connect JSON over HTTPS, Node's fetch)
// against the stack started by scripts/e2e.sh (MariaDB), or a gateway in front of
// Vitess (tests/vitess-clients.sh; FERRY_DRIVER_VITESS=1, server.js). The dev CA is
// trusted through NODE_EXTRA_CA_CERTS (set by the runner).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Client, DatabaseError } from '@planetscale/database'
import { host, port, user, url, createTable, literalInt, literalIntType, missingTable } from './server.js'

const client = new Client({ url })

test('SELECT 1 with the driver', async () => {
  const r = await client.execute('SELECT 1 AS one')
  assert.deepEqual(r.rows, [{ one: literalInt(1) }])
  assert.equal(r.headers[0], 'one')
  assert.equal(r.types.one, literalIntType)
  assert.ok(r.time >= 0)
})

test('types cast as the driver casts them', async () => {
  const t = `drv_${process.pid}_${Date.now()}`
  await createTable(client, t, `id BIGINT AUTO_INCREMENT PRIMARY KEY, n INT, u INT UNSIGNED,
    d DECIMAL(6,2), f DOUBLE, s VARCHAR(10), b VARBINARY(4), dt DATETIME, y YEAR, j JSON`, { autoIncrement: true })
  const ins = await client.execute(`INSERT INTO ${t} (n, u, d, f, s, b, dt, y, j) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [-7, 7, '12.50', 0.5, "it's", 'ab', '2024-01-02 03:04:05', 2024, '{"a":1}'])
  assert.equal(ins.rowsAffected, 1)
  assert.equal(ins.insertId, '1')
  await client.execute(`INSERT INTO ${t} (id) VALUES (NULL)`)
  const r = await client.execute(`SELECT * FROM ${t} ORDER BY id`)
  const [row, nulls] = r.rows
  assert.equal(row.id, '1') // INT64 stays a string
  assert.equal(row.n, -7)
  assert.equal(row.u, 7)
  assert.equal(row.d, '12.50')
  assert.equal(row.f, 0.5)
  assert.equal(row.s, "it's")
  assert.deepEqual([...row.b], [97, 98]) // charset 63 → bytes
  assert.equal(row.dt, '2024-01-02 03:04:05')
  assert.equal(row.y, 2024)
  assert.equal(nulls.n, null)
  assert.equal(nulls.s, null)
})

// Past 1 MiB of rows the shim sends the answer in pieces while MariaDB still sends
// them (docs/design/shim.md "Large Execute answers go out in pieces"); the driver (Node's fetch asks for gzip) gets one JSON answer.
test('an answer of several MB arrives whole', async () => {
  const sql = `SELECT n, REPEAT(CHAR(97 + n % 26 USING utf8mb4), 200000) AS v FROM
    (WITH RECURSIVE k(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM k WHERE n < 29) SELECT n FROM k) s`
  const r = await client.execute(sql)
  assert.equal(r.rows.length, 30)
  r.rows.forEach((row, i) => {
    assert.equal(row.n, literalInt(i))
    assert.equal(row.v, String.fromCharCode(97 + (i % 26)).repeat(200000))
  })
  assert.deepEqual(r.headers, ['n', 'v'])
})

test('SQL errors throw DatabaseError with the MySQL message', async () => {
  await assert.rejects(client.execute('SELECT * FROM no_such_table_drv'), (e) => {
    assert.ok(e instanceof DatabaseError)
    assert.match(e.message, missingTable('no_such_table_drv'))
    return true
  })
  // ... and the connection keeps working.
  assert.deepEqual((await client.execute('SELECT 2 AS two')).rows, [{ two: literalInt(2) }])
})

test('bad credentials are a 401', async () => {
  const bad = new Client({ url: `https://${user}:wrong@${host}:${port}` })
  await assert.rejects(bad.execute('SELECT 1'), (e) => {
    assert.equal(e.status, 401)
    return true
  })
})
