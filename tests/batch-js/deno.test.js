// The same helper inside Deno (an edge runtime: web fetch, no Node APIs), the binary of
// the npm `deno` package. The dev CA is trusted with --cert FERRY_CA.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { ca } from './common.js'

const here = (p) => fileURLToPath(new URL(p, import.meta.url))

test('a transaction and a pipeline from Deno', { timeout: 60000 }, async () => {
  const args = [here('node_modules/deno/bin.cjs'), 'run', '--no-config', '--no-lock', '--no-prompt',
    '--allow-net', '--allow-env', '--allow-read']
  if (ca) args.push('--cert', ca)
  args.push(here('edge/deno-run.js'))
  const { code, stdout, stderr } = await new Promise((resolve) => {
    execFile(process.execPath, args, { env: { ...process.env, NO_COLOR: '1' } }, (err, stdout, stderr) =>
      resolve({ code: err ? err.code ?? 1 : 0, stdout, stderr }))
  })
  assert.equal(code, 0, `deno failed:\n${stderr}\n${stdout}`)
  const report = JSON.parse(stdout.trim().split('\n').pop())
  assert.equal(report.runtime, 'deno')
  assert.deepEqual(report.checked, ['transaction', 'rollback', 'pipeline', 'session'])
})
