// Mints a short-lived token for a Ferry gateway that verifies tokens (envoy/tokens.yaml,
// docs/guides/tokens.md): an ES256 JWT signed with WebCrypto. One ES module, no
// dependencies, no build step; it runs wherever `crypto.subtle` exists: Node 20+, Deno,
// Bun, Cloudflare Workers / workerd, Vercel Edge. Mint on a server (your backend or an
// edge function holding the private key), then hand the token to the browser or the
// function that calls Ferry with `Authorization: Bearer <token>`.
//
//   import { mintToken } from './ferry-token.js'
//   const token = await mintToken({
//     privateKey: env.FERRY_SIGNING_KEY,   // PKCS#8 PEM of a P-256 key (or a CryptoKey)
//     kid: 'file-1', issuer: 'https://idp.example.com', audience: 'ferry',
//     account: 'app', subject: user.id, ttlSeconds: 300,
//   })

const b64url = (bytes) =>
  btoa(String.fromCharCode(...new Uint8Array(bytes)))
    .replaceAll('+', '-')
    .replaceAll('/', '_')
    .replace(/=+$/, '')

const utf8 = (s) => new TextEncoder().encode(s)

/** A P-256 private key from PKCS#8 PEM, for signing. */
export async function importSigningKey(pem) {
  const body = pem.replace(/-----(BEGIN|END) PRIVATE KEY-----/g, '').replace(/\s+/g, '')
  const der = Uint8Array.from(atob(body), (c) => c.charCodeAt(0))
  return crypto.subtle.importKey('pkcs8', der, { name: 'ECDSA', namedCurve: 'P-256' }, false, [
    'sign'
  ])
}

/**
 * A signed token. `account` goes into the `ferry_account` claim (the shim maps it to a
 * MySQL account: FERRY_TOKEN_ACCOUNTS); `claims` adds or overrides any claim.
 */
export async function mintToken({
  privateKey,
  kid,
  issuer,
  audience,
  account,
  subject,
  ttlSeconds = 300,
  claims = {}
}) {
  const key = typeof privateKey === 'string' ? await importSigningKey(privateKey) : privateKey
  const now = Math.floor(Date.now() / 1000)
  const payload = { iss: issuer, aud: audience, iat: now, exp: now + ttlSeconds }
  if (subject !== undefined) payload.sub = subject
  if (account !== undefined) payload.ferry_account = account
  Object.assign(payload, claims)
  const head = b64url(utf8(JSON.stringify({ alg: 'ES256', typ: 'JWT', kid })))
  const body = b64url(utf8(JSON.stringify(payload)))
  // WebCrypto's ECDSA signature is r || s, as JWS (RFC 7518 3.4) wants it.
  const signature = await crypto.subtle.sign(
    { name: 'ECDSA', hash: 'SHA-256' },
    key,
    utf8(`${head}.${body}`)
  )
  return `${head}.${body}.${b64url(signature)}`
}
