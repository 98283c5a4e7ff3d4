// Run by deno.test.js inside Deno (the npm `deno` package's binary): the helper as an
// edge runtime loads it, over Deno's own fetch and TLS (the dev CA through --cert).
// Prints one JSON line with what it checked; exits non-zero on any failure.
import { FerryBatch, FerryBatchError, typed } from '../../../clients/js/ferry-batch.js'

function check (cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`)
}
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b)

const base = new URL(Deno.env.get('FERRY_URL') ?? 'https://127.0.0.1:48543')
const db = new FerryBatch({
  host: base.host,
  username: Deno.env.get('FERRY_USER') ?? 'ferry',
  password: Deno.env.get('FERRY_PASSWORD') ?? 'ferry'
})
const t = `batchjs_deno_${crypto.randomUUID().slice(0, 8)}`
const checked = []

await db.pipeline([`CREATE TABLE ${t} (id BIGINT PRIMARY KEY, v VARCHAR(20), d DECIMAL(8,2), b VARBINARY(4))`])
try {
  // A transaction: typed args, a read in it.
  const ins = `INSERT INTO ${t} (id, v, d, b) VALUES (?, ?, ?, ?)`
  const tx = await db.transaction([
    { query: ins, args: [1, "o'ne", typed('DECIMAL', '1.50'), new Uint8Array([0, 255])] },
    { query: ins, args: [9007199254740993n, 'two', '2.25', null] },
    `SELECT id, v, d, b FROM ${t} ORDER BY id`
  ], { isolation: 'SERIALIZABLE' })
  check(same(tx.results.map((r) => r.rowsAffected), [1, 1, 0]), 'transaction rowsAffected')
  const rows = tx.results[2].rows
  check(rows.length === 2 && rows[0].id === '1' && rows[0].v === "o'ne" && rows[0].d === '1.50', 'row 1')
  check(rows[0].b instanceof Uint8Array && same([...rows[0].b], [0, 255]), 'row 1 bytes')
  check(rows[1].id === '9007199254740993' && rows[1].b === null, 'row 2')
  checked.push('transaction')

  // A failing transaction: nothing applied, the statement named.
  let failed = null
  try {
    await db.transaction([{ query: ins, args: [3, 'x', '0', null] }, { query: ins, args: [1, 'dup', '0', null] }])
  } catch (e) {
    failed = e
  }
  check(failed instanceof FerryBatchError && failed.index === 1 && failed.code === 'ALREADY_EXISTS', `failed transaction: ${failed}`)
  checked.push('rollback')

  // A pipeline: an error, a condition that skips, the session carried to the next call.
  const p = await db.pipeline([
    { query: ins, args: [1, 'dup', '0', null] },
    { query: ins, args: [4, 'four', '4', null], if: { ok: 0 } },
    { query: 'SET @seen = (SELECT COUNT(*) FROM ' + t + ')', if: { error: 0 } }
  ])
  check(p.results[0].error?.code === 'ALREADY_EXISTS', 'pipeline error')
  check(p.results[1].skipped === true && p.results[2].skipped === false && p.results[2].error === null, 'pipeline skip')
  const next = await db.pipeline(['SELECT @seen AS seen'])
  check(same(next.results[0].rows, [{ seen: '2' }]), `session carried: ${JSON.stringify(next.results[0].rows)}`)
  checked.push('pipeline', 'session')
} finally {
  await db.pipeline([`DROP TABLE IF EXISTS ${t}`])
}
console.log(JSON.stringify({ runtime: 'deno', version: Deno.version.deno, checked }))
