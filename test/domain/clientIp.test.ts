import t from 'tap'
import { clientAddress, normaliseIp, parseProxyTrust, type ProxyTrust } from '../../src/domain/clientIp.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('a pure domain rule')

/** Which address is the client's: the rightmost one that no trusted proxy wrote. */

t.test('TRUST_PROXY is read as false, a hop count or a list of proxies', async (t) => {
  const cases: [string | undefined, ProxyTrust][] = [
    [undefined, false],
    ['', false],
    ['false', false],
    ['0', false],
    ['true', { hops: 1 }],
    ['2', { hops: 2 }],
    ['10.0.0.1', { addresses: ['10.0.0.1'] }],
    ['10.0.0.1, 10.1.0.0/16 ,fd00::/8', { addresses: ['10.0.0.1', '10.1.0.0/16', 'fd00::/8'] }],
    ['loopback,uniquelocal', { addresses: ['loopback', 'uniquelocal'] }],
  ]
  for (const [value, expected] of cases) t.same(parseProxyTrust(value), expected, `${JSON.stringify(value)}`)
  for (const bad of ['yes', '10.0.0.1,', '10.0.0.0/33', '10.0.0.1/abc', '-1', '1000', 'proxy.example'])
    t.throws(() => parseProxyTrust(bad), TypeError, `${bad} is refused`)
})

t.test('the client is the rightmost address no trusted proxy wrote', async (t) => {
  const one: ProxyTrust = { hops: 1 }
  const two: ProxyTrust = { hops: 2 }
  const list: ProxyTrust = { addresses: ['10.0.0.0/8', '2001:db8:ffff::/48'] }
  const cases: [string, string | undefined, string | undefined, ProxyTrust, string | null][] = [
    ['no trust: the peer, header ignored', '192.0.2.1', '6.6.6.6', false, '192.0.2.1'],
    ['one hop: what the proxy saw, not the client\'s claim', '10.0.0.1', '6.6.6.6, 203.0.113.5', one, '203.0.113.5'],
    ['one hop, no header: the peer', '10.0.0.1', undefined, one, '10.0.0.1'],
    ['two hops: the entry left of the inner proxy\'s', '10.0.0.1', '6.6.6.6, 203.0.113.5, 10.0.0.2', two, '203.0.113.5'],
    ['two hops but one header entry: the leftmost there is', '10.0.0.1', '203.0.113.5', two, '203.0.113.5'],
    ['list: skips trusted proxies from the right', '10.0.0.1', '6.6.6.6, 203.0.113.5, 10.0.0.2, 10.3.4.5', list, '203.0.113.5'],
    ['list: stops at the first untrusted entry', '10.0.0.1', '203.0.113.5, 198.51.100.1, 10.0.0.2', list, '198.51.100.1'],
    ['list: an untrusted peer is the client', '192.0.2.9', '6.6.6.6', list, '192.0.2.9'],
    ['list: IPv6 proxies', '2001:db8:ffff::1', '2001:DB8:1::5, 2001:db8:ffff::2', list, '2001:db8:1::5'],
    ['list: IPv4 peer seen as IPv4-mapped IPv6', '::ffff:10.0.0.1', '203.0.113.5', list, '203.0.113.5'],
    ['junk where the client should be: null', '10.0.0.1', '6.6.6.6, not-an-address', one, null],
    ['junk is not trusted as a proxy: null', '10.0.0.1', '203.0.113.5, <script>', list, null],
    ['a port is not an address: null', '10.0.0.1', '203.0.113.5:4711', one, null],
    ['spaces around entries are fine', '10.0.0.1', '  6.6.6.6 ,   203.0.113.5  ', one, '203.0.113.5'],
    ['no peer address: null', undefined, undefined, false, null],
  ]
  for (const [name, peer, forwardedFor, trust, expected] of cases) t.equal(clientAddress(peer, forwardedFor, trust), expected, name)
})

t.test('only IP addresses are recorded, in one form', async (t) => {
  const cases: [string | undefined, string | null][] = [
    ['203.0.113.5', '203.0.113.5'],
    ['::ffff:192.0.2.7', '192.0.2.7'],
    ['::FFFF:192.0.2.7', '192.0.2.7'],
    ['2001:DB8::1', '2001:db8::1'],
    ['fe80::1%eth0', 'fe80::1'],
    ['::1', '::1'],
    [undefined, null],
    ['', null],
    ['unknown', null],
    ['1.2.3.4%eth0', null],
    ['999.1.1.1', null],
    ["1.2.3.4'; DROP TABLE x", null],
    ['::ffff:999.0.0.1', null],
  ]
  for (const [input, expected] of cases) t.equal(normaliseIp(input), expected, JSON.stringify(input))
})
