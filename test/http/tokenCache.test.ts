import t from 'tap'
import { VerifiedTokenCache } from '../../src/http/plugins/tokenCache.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('an in-memory token cache')

t.test('verified tokens are kept until they expire, within a bound', async (t) => {
  let now = 1_000_000
  const cache = new VerifiedTokenCache<{ exp?: unknown; sub: string }>(2, () => now)
  cache.set('a', { sub: 'a', exp: 1_010 })
  cache.set('never-expires', { sub: 'x' })
  t.equal(cache.get('a')?.sub, 'a')
  t.equal(cache.get('never-expires'), undefined, 'a token without exp is not kept')
  now = 1_010_000
  t.equal(cache.get('a'), undefined, 'gone at its expiry')
  cache.set('b', { sub: 'b', exp: 2_000 })
  cache.set('c', { sub: 'c', exp: 2_000 })
  cache.set('d', { sub: 'd', exp: 2_000 })
  t.equal(cache.size, 2)
  t.equal(cache.get('b'), undefined, 'the oldest leaves first')
  t.equal(cache.get('d')?.sub, 'd')

  const signature = 'S'.repeat(40)
  cache.set(`Bearer aaa.bbb.${signature}`, { sub: 'real', exp: 2_000 })
  t.equal(cache.get(`Bearer aaa.bbb.${signature}`)?.sub, 'real')
  t.equal(cache.get(`Bearer aaa.forged.${signature}`), undefined, 'the same signature on another payload is a miss')
  t.equal(cache.get(`Bearer  aaa.bbb.${signature}`), undefined, 'only the exact header hits')
})
