// ferry-batch.js — Ferry's ExecuteBatch RPC (ferry.v1alpha1.Database/ExecuteBatch) from
// JavaScript: several statements in one HTTPS request, in one transaction or as a
// pipeline. One ES module, no dependencies, no build step: it needs `fetch`, `atob`,
// `btoa`, `TextEncoder` and `TextDecoder` (Node 18+, Deno, Bun, Cloudflare Workers /
// workerd, Vercel Edge, browsers). Configuration, Basic auth, the session and the
// decoding of rows follow @planetscale/database's `Connection`, so a result reads the
// same as the driver's for the same query. README.md next to this file documents it.

export const VERSION = '0.1.0'

const PATH = '/ferry.v1alpha1.Database/ExecuteBatch'
const ISOLATION_LEVELS = ['DEFAULT', 'READ_UNCOMMITTED', 'READ_COMMITTED', 'REPEATABLE_READ', 'SERIALIZABLE']
const CONDITION_KEYS = ['ok', 'error', 'not', 'all', 'any']
const INT64_MIN = -(2n ** 63n)
const INT64_MAX = 2n ** 63n - 1n
const UINT64_MAX = 2n ** 64n - 1n

/**
 * Every failure the helper throws: a transaction the server rolled back (HTTP 200 with a
 * batch-level `error`), an HTTP/Connect error (`status` not 200: 401 bad credentials, a
 * refused request...) or an answer that is not JSON.
 *
 * - `status`: 400 for a failed transaction (as the driver's DatabaseError for SQL
 *   errors), else the HTTP status.
 * - `code`: the vtrpc code name (`ALREADY_EXISTS`, `READ_ONLY`, ...) of a failed
 *   transaction, or the Connect code (`unauthenticated`, ...) of an HTTP error.
 * - `body`: the server's error object (`{ code, message }`) or, for an answer that is
 *   not JSON, `{ text }` with the start of the body.
 * - `index`: the failing statement (0-based) of a failed transaction; `null` when the
 *   BEGIN or the COMMIT failed or the error is not about a statement.
 * - `results`: the statements' results the server sent (up to the failing one).
 */
export class FerryBatchError extends Error {
  constructor (message, { status, code, body, index = null, results = [], time = 0 } = {}) {
    super(message)
    this.name = 'FerryBatchError'
    this.status = status
    this.code = code
    this.body = body
    this.index = index
    this.results = results
    this.time = time
  }
}

/** A value sent with an explicit vitess type: `typed('DECIMAL', '1.50')`. */
export class Typed {
  constructor (type, value) {
    if (typeof type !== 'string' || type === '') throw new TypeError('typed(): the type is a vitess type name, e.g. "DECIMAL"')
    this.type = type
    this.value = value
  }
}

/** `typed(type, value)`: a bind value of this vitess type (`value`: its text, or its bytes). */
export const typed = (type, value) => new Typed(type, value)

export class FerryBatch {
  /**
   * `config`: `{ url: 'https://user:pass@host[:port]' }` or `{ host, username, password }`,
   * as @planetscale/database takes them; optional `fetch` (a fetch function) and `cast`
   * (`(field, value) => any`, the driver's signature: `value` is the column's bytes as a
   * binary string, or null).
   */
  constructor (config = {}) {
    let { username, password, host } = config
    let base
    if (config.url) {
      const url = new URL(config.url)
      username = decodeURIComponent(url.username)
      password = decodeURIComponent(url.password)
      host = url.host
      // As the driver: http: stays http:, anything else is https:; the path is not used.
      base = `${url.protocol === 'http:' ? 'http:' : 'https:'}//${url.host}`
    } else if (host) {
      base = `https://${host}`
    } else {
      throw new TypeError('FerryBatch: give { url } or { host, username, password }')
    }
    this.url = new URL(PATH, base).toString()
    this.host = host
    this.username = username ?? ''
    this._auth = `Basic ${base64(utf8Bytes(`${this.username}:${password ?? ''}`))}`
    this._fetch = config.fetch ?? globalThis.fetch
    if (typeof this._fetch !== 'function') throw new TypeError('FerryBatch: no fetch function (pass config.fetch)')
    this._cast = config.cast ?? cast
    /** The psdb session of the last answer, sent with the next call (null: a new one).
     * The same object as the driver's `Connection#session`: either may take the other's. */
    this.session = null
    // Calls on one instance run one after another: each needs the previous one's session.
    this._tail = Promise.resolve()
  }

  /**
   * One request: BEGIN, the statements, COMMIT. The first error rolls everything back
   * and is thrown as a FerryBatchError naming the statement (`index`).
   * `statements`: an array of `'SQL'` or `{ query, args }`.
   * `options`: `{ isolation: 'SERIALIZABLE' | 'REPEATABLE READ' | 'READ COMMITTED' |
   * 'READ UNCOMMITTED', readOnly: true, signal }`.
   * Resolves to `{ results, time }`: one result per statement.
   */
  async transaction (statements, options = {}) {
    const body = this._request(statements, 'TRANSACTION')
    const txn = {}
    if (options.isolation != null) txn.isolation = isolation(options.isolation)
    if (options.readOnly) txn.readOnly = true
    if (Object.keys(txn).length) body.transaction = txn
    return this._call(body, options.signal)
  }

  /**
   * One request: each statement in order, each answered with its result or its `error`
   * (nothing is thrown for SQL errors). A statement with `if` runs only if its condition
   * over earlier statements holds, else it is answered `skipped`.
   * `statements`: an array of `'SQL'` or `{ query, args, if }`; `if`: `{ ok: i }`,
   * `{ error: i }`, `{ not: cond }`, `{ all: [cond, ...] }`, `{ any: [cond, ...] }`.
   * Resolves to `{ results, time }`: one result per statement.
   */
  async pipeline (statements, options = {}) {
    return this._call(this._request(statements, 'PIPELINE'), options.signal)
  }

  _request (statements, mode) {
    if (!Array.isArray(statements) || statements.length === 0) {
      throw new TypeError('a batch is a non-empty array of statements')
    }
    return { statements: statements.map((s, i) => statement(s, i, mode)), mode }
  }

  _call (body, signal) {
    const run = () => this._send(body, signal)
    const answer = this._tail.then(run, run)
    this._tail = answer.then(() => {}, () => {})
    return answer
  }

  async _send (body, signal) {
    body.session = this.session ?? undefined
    const doFetch = this._fetch
    const response = await doFetch(this.url, {
      method: 'POST',
      body: JSON.stringify(body),
      headers: {
        'Content-Type': 'application/json',
        'User-Agent': `ferry-batch-js/${VERSION}`,
        Authorization: this._auth
      },
      signal
    })
    const text = await response.text()
    let parsed
    try {
      parsed = JSON.parse(text)
    } catch {}
    if (!response.ok) {
      const err = parsed?.error ?? parsed
      if (err && typeof err === 'object' && (err.code || err.message)) {
        throw new FerryBatchError(err.message ?? `HTTP ${response.status}`, { status: response.status, code: err.code, body: err })
      }
      throw new FerryBatchError(`Expected JSON from Ferry, got HTTP ${response.status}${response.statusText ? ' ' + response.statusText : ''}`,
        { status: response.status, code: 'unknown', body: { text: text.slice(0, 4096) } })
    }
    if (!parsed || typeof parsed !== 'object') {
      throw new FerryBatchError('Ferry answered HTTP 200 with a body that is not a JSON object',
        { status: response.status, code: 'unknown', body: { text: text.slice(0, 4096) } })
    }
    if (parsed.session) this.session = parsed.session
    const results = (parsed.results ?? []).map((r, i) => this._result(r, body.statements[i]?.query))
    const time = (parsed.timing ?? 0) * 1000
    if (parsed.error) {
      const index = parsed.failedStatement ?? null
      const code = parsed.error.code ?? 'UNKNOWN'
      const message = parsed.error.message ?? ''
      const where = index === null ? 'the transaction' : `statement ${index}`
      throw new FerryBatchError(`${where} failed (${code}): ${message}`,
        { status: 400, code, body: parsed.error, index, results, time })
    }
    return { results, time }
  }

  _result (r, query) {
    const result = r.result
    const fields = result?.fields ?? []
    for (const field of fields) field.type ||= 'NULL'
    const rows = result ? decodeRows(result, fields, this._cast) : []
    const types = {}
    for (const f of fields) types[f.name] = f.type
    return {
      statement: query,
      headers: fields.map((f) => f.name),
      types,
      fields,
      rows,
      rowsAffected: result?.rowsAffected ? parseInt(result.rowsAffected, 10) : 0,
      insertId: result?.insertId ?? '0',
      size: rows.length,
      time: (r.timing ?? 0) * 1000,
      error: r.error ? { code: r.error.code ?? 'UNKNOWN', message: r.error.message ?? '' } : null,
      skipped: r.skipped === true
    }
  }
}

// ---- statements and bind variables -------------------------------------------------

function statement (s, i, mode) {
  if (typeof s === 'string') s = { query: s }
  if (!s || typeof s !== 'object' || typeof s.query !== 'string') {
    throw new TypeError(`statement ${i}: give 'SQL' or { query: 'SQL', args }`)
  }
  const out = { query: s.query }
  if (s.args != null) {
    const vars = bindVariables(s.args, i)
    if (Object.keys(vars).length) out.bindVariables = vars
  }
  if (s.if != null) {
    if (mode !== 'PIPELINE') throw new TypeError(`statement ${i}: conditions (if) are for pipeline() only`)
    out.condition = condition(s.if, i)
  }
  return out
}

// Positional args (an array) are vitess's `?` names v1, v2, ...; named args (an object)
// keep their names (`:name`, and `::name` for a list).
function bindVariables (args, i) {
  const vars = {}
  if (Array.isArray(args)) {
    args.forEach((v, n) => {
      if (Array.isArray(v)) {
        throw new TypeError(`statement ${i}, argument ${n + 1}: a list binds to a named ::list placeholder only (args as an object)`)
      }
      vars[`v${n + 1}`] = bindValue(v, `statement ${i}, argument ${n + 1}`)
    })
  } else if (typeof args === 'object') {
    for (const [name, v] of Object.entries(args)) {
      if (Array.isArray(v)) {
        if (v.length === 0) throw new TypeError(`statement ${i}, ::${name}: an empty list`)
        vars[name] = { type: 'TUPLE', values: v.map((x, k) => bindValue(x, `statement ${i}, ::${name}[${k}]`, true)) }
      } else {
        vars[name] = bindValue(v, `statement ${i}, :${name}`)
      }
    }
  } else {
    throw new TypeError(`statement ${i}: args is an array (for ?) or an object (for :name)`)
  }
  return vars
}

/** One JS value → a vitess BindVariable (or Value) in protojson: { type, value: base64 }. */
function bindValue (v, where, inList = false) {
  const text = (type, s) => ({ type, value: base64(utf8Bytes(s)) })
  if (v === null || v === undefined) return { type: 'NULL_TYPE' }
  switch (typeof v) {
    case 'number':
      if (!Number.isFinite(v)) throw new TypeError(`${where}: ${v} is not a SQL value`)
      return Number.isSafeInteger(v) ? text('INT64', String(v)) : text('FLOAT64', String(v))
    case 'bigint':
      if (v >= INT64_MIN && v <= INT64_MAX) return text('INT64', v.toString())
      if (v > INT64_MAX && v <= UINT64_MAX) return text('UINT64', v.toString())
      throw new RangeError(`${where}: ${v} does not fit in 64 bits`)
    case 'boolean':
      return text('INT64', v ? '1' : '0')
    case 'string':
      return text('VARCHAR', v)
    case 'object':
      break
    default:
      throw new TypeError(`${where}: a ${typeof v} is not a SQL value`)
  }
  if (v instanceof Typed) {
    if (v.value === null || v.value === undefined) return { type: v.type }
    const bytes = asBytes(v.value)
    return { type: v.type, value: base64(bytes ?? utf8Bytes(String(v.value))) }
  }
  const bytes = asBytes(v)
  if (bytes) return { type: 'VARBINARY', value: base64(bytes) }
  if (v instanceof Date) {
    if (Number.isNaN(v.getTime())) throw new RangeError(`${where}: an invalid Date`)
    // As the driver writes a Date: its UTC time, without the Z.
    return text('DATETIME', v.toISOString().slice(0, -1))
  }
  if (Array.isArray(v)) throw new TypeError(`${where}: a list inside a list`)
  const proto = Object.getPrototypeOf(v)
  if (proto === Object.prototype || proto === null) return text('JSON', JSON.stringify(v))
  // Other objects (a Decimal, a URL...) as their text, as the driver does.
  return text('VARCHAR', String(v))
}

function asBytes (v) {
  if (v instanceof Uint8Array) return v
  if (v instanceof ArrayBuffer) return new Uint8Array(v)
  if (ArrayBuffer.isView(v)) return new Uint8Array(v.buffer, v.byteOffset, v.byteLength)
  return null
}

function isolation (level) {
  const name = String(level).trim().toUpperCase().replace(/[\s-]+/g, '_')
  if (!ISOLATION_LEVELS.includes(name)) {
    throw new TypeError(`isolation: ${level} is not one of READ UNCOMMITTED, READ COMMITTED, REPEATABLE READ, SERIALIZABLE`)
  }
  return name
}

// { ok: 0 } | { error: 1 } | { not: c } | { all: [c...] } | { any: [c...] } → protojson
// of ferry.v1alpha1.Condition (all/any hold a Conditions message).
function condition (c, i) {
  const keys = c && typeof c === 'object' ? Object.keys(c) : []
  if (keys.length !== 1 || !CONDITION_KEYS.includes(keys[0])) {
    throw new TypeError(`statement ${i}: a condition is one of { ok: n }, { error: n }, { not: c }, { all: [...] }, { any: [...] }`)
  }
  const [key] = keys
  const v = c[key]
  switch (key) {
    case 'ok':
    case 'error':
      if (!Number.isInteger(v) || v < 0 || v >= i) {
        throw new TypeError(`statement ${i}: { ${key}: ${v} } must name an earlier statement (0 to ${i - 1})`)
      }
      return { [key]: v }
    case 'not':
      return { not: condition(v, i) }
    default: {
      const list = Array.isArray(v) ? v : v?.conditions
      // As the server (and Hrana): `all` of none holds, `any` of none does not.
      if (!Array.isArray(list)) throw new TypeError(`statement ${i}: { ${key}: [...] } needs a list of conditions`)
      return { [key]: { conditions: list.map((x) => condition(x, i)) } }
    }
  }
}

// ---- rows ---------------------------------------------------------------------------

// A row is `lengths` (strings; -1 is NULL) over `values` (base64 of the columns'
// bytes, concatenated). Each column becomes a binary string (one char per byte), as
// the driver hands it to `cast`.
function decodeRows (result, fields, castFn) {
  return (result.rows ?? []).map((row) => {
    const bytes = row.values ? atob(row.values) : ''
    const lengths = row.lengths ?? []
    const obj = {}
    let at = 0
    fields.forEach((field, ix) => {
      const width = parseInt(lengths[ix], 10)
      let raw = null
      if (width >= 0) {
        raw = bytes.substring(at, at + width)
        at += width
      }
      obj[field.name] = castFn(field, raw)
    })
    return obj
  })
}

const STRING_TYPES = new Set(['INT64', 'UINT64', 'DATETIME', 'DATE', 'TIMESTAMP', 'TIME', 'DECIMAL'])
const INTEGER_TYPES = new Set(['INT8', 'INT16', 'INT24', 'INT32', 'UINT8', 'UINT16', 'UINT24', 'UINT32', 'YEAR'])
const BINARY_CHARSET = 63

/**
 * The default cast, as @planetscale/database's: NULL → null; INT64/UINT64, DECIMAL,
 * DATE/TIME/DATETIME/TIMESTAMP → string; smaller ints and YEAR → number; FLOAT32/64 →
 * number; JSON → parsed; any other column of the binary charset (63: BLOB, VARBINARY,
 * BIT...) → Uint8Array; the rest → string (UTF-8).
 */
export function cast (field, value) {
  if (value === null || value === undefined) return value
  const type = field.type
  if (STRING_TYPES.has(type)) return value
  if (type === 'JSON') return JSON.parse(utf8Text(value))
  if (INTEGER_TYPES.has(type)) return parseInt(value, 10)
  if (type === 'FLOAT32' || type === 'FLOAT64') return parseFloat(value)
  if (field.charset === BINARY_CHARSET) return binaryBytes(value)
  return utf8Text(value)
}

// ---- bytes --------------------------------------------------------------------------

const encoder = new TextEncoder()
const decoder = new TextDecoder('utf-8')

function utf8Bytes (s) {
  return encoder.encode(s)
}

function binaryBytes (s) {
  const out = new Uint8Array(s.length)
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i)
  return out
}

function utf8Text (s) {
  return s ? decoder.decode(binaryBytes(s)) : ''
}

function base64 (bytes) {
  let s = ''
  for (let i = 0; i < bytes.length; i += 0x8000) {
    s += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000))
  }
  return btoa(s)
}
