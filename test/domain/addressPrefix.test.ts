import t from 'tap'
import { WHOLE_ADDRESS, parseAddressPrefix, truncateAddress } from '../../src/domain/addressPrefix.js'

t.test('addresses cut to their leading bits', async (t) => {
  const cases: Array<[string, string, string]> = [
    ['203.0.113.77', '24,48', '203.0.113.0'],
    ['203.0.113.77', '16,48', '203.0.0.0'],
    ['203.0.113.77', '20,48', '203.0.112.0'],
    ['203.0.113.77', '32,128', '203.0.113.77'],
    ['203.0.113.77', '0,0', '0.0.0.0'],
    ['2001:db8:1:2::5', '24,48', '2001:db8:1::'],
    ['2001:db8:1:2::5', '24,64', '2001:db8:1:2::'],
    ['2001:db8:1:2::5', '24,52', '2001:db8:1::'],
    ['2001:db8:abcd:1234::5', '24,56', '2001:db8:abcd:1200::'],
    ['::1', '24,48', '::'],
    ['::ffff:10.1.2.3', '24,96', '::ffff:0:0'],
    ['2001:db8::5', '24,128', '2001:db8::5'],
  ]
  for (const [address, prefix, expected] of cases) t.equal(truncateAddress(address, parseAddressPrefix(prefix)), expected, `${address} at ${prefix}`)
  t.equal(truncateAddress('not-an-address', { v4: 8, v6: 8 }), 'not-an-address')
  t.same(parseAddressPrefix('24'), { v4: 24, v6: 128 }, 'one number: IPv4 only')
  t.same(WHOLE_ADDRESS, { v4: 32, v6: 128 })
  for (const bad of ['', '33', '24,129', '24,48,8', 'a', '-1', '24,']) t.throws(() => parseAddressPrefix(bad), `${JSON.stringify(bad)} refused`)
})
