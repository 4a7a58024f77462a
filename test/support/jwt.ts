import { generateKeyPairSync, type KeyObject } from 'node:crypto'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { createSigner } from 'fast-jwt'

/** Hand-made tokens and keys for the authentication tests: nothing here goes through the service's own issuer. */

export const nowSeconds = (): number => Math.floor(Date.now() / 1000)

const b64url = (value: object): string => Buffer.from(JSON.stringify(value)).toString('base64url')

/** A token with any header and payload and the given signature part (none by default). */
export function rawToken(header: object, payload: object, signature = ''): string {
  return `${b64url(header)}.${b64url(payload)}.${signature}`
}

/** The payload of a token, read without verifying it. */
export function decodePayload(token: string): Record<string, unknown> {
  const part = token.split('.')[1] ?? ''
  return JSON.parse(Buffer.from(part, 'base64url').toString('utf8')) as Record<string, unknown>
}

export type Algorithm = 'HS256' | 'HS512' | 'RS256' | 'ES256'

/** Signs `payload` exactly as given (no claims added) with `key` and `algorithm`. */
export function sign(payload: Record<string, unknown>, key: string, algorithm: Algorithm = 'HS256', kid?: string): string {
  return createSigner({ key, algorithm, ...(kid !== undefined ? { kid } : {}) })(payload)
}

export interface PemKeyPair {
  publicKey: KeyObject
  publicPem: string
  privatePem: string
}

export function keyPair(type: 'rsa' | 'ec'): PemKeyPair {
  const { publicKey, privateKey } =
    type === 'rsa' ? generateKeyPairSync('rsa', { modulusLength: 2048 }) : generateKeyPairSync('ec', { namedCurve: 'P-256' })
  return {
    publicKey,
    publicPem: publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    privatePem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  }
}

interface Teardown {
  teardown(fn: () => unknown): void
}

/** A JWKS endpoint on 127.0.0.1 serving `{keys}` at `/.well-known/jwks.json`; counts the fetches. */
export async function serveJwks(
  t: Teardown,
  keys: Array<{ key: KeyObject; kid: string; alg: 'RS256' | 'ES256' }>,
): Promise<{ url: string; fetches: () => number }> {
  const jwks = { keys: keys.map(({ key, kid, alg }) => ({ ...key.export({ format: 'jwk' }), kid, alg, use: 'sig' })) }
  let fetches = 0
  const server = createServer((req, res) => {
    if (req.url !== '/.well-known/jwks.json') {
      res.writeHead(404).end()
      return
    }
    fetches++
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(jwks))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  const { port } = server.address() as AddressInfo
  return { url: `http://127.0.0.1:${port}/.well-known/jwks.json`, fetches: () => fetches }
}
