import { isIP } from 'node:net'

/** How much of a client's address is kept: the leading bits of an IPv4 and of an IPv6 address. */
export interface AddressPrefix {
  v4: number
  v6: number
}

/** Every bit: the whole address. */
export const WHOLE_ADDRESS: AddressPrefix = { v4: 32, v6: 128 }

/**
 * Reads `<IPv4 bits>,<IPv6 bits>` (e.g. `24,48`), or one number for both
 * families' shortest sensible reading (`24` keeps 24 bits of IPv4 and the
 * whole of IPv6). Throws on anything else.
 */
export function parseAddressPrefix(text: string): AddressPrefix {
  const parts = text.split(',').map((part) => part.trim())
  const bits = parts.map((part) => (/^\d{1,3}$/.test(part) ? Number(part) : Number.NaN))
  const [v4, v6 = WHOLE_ADDRESS.v6] = bits
  if (parts.length > 2 || v4 === undefined || !(v4 >= 0 && v4 <= 32) || !(v6 >= 0 && v6 <= 128)) {
    throw new TypeError(`${text} is not <IPv4 bits 0-32>[,<IPv6 bits 0-128>] (e.g. 24,48)`)
  }
  return { v4, v6 }
}

/** An IPv6 address's eight 16-bit groups, `::` expanded (a trailing dotted IPv4 part read as two groups). */
function ipv6Groups(address: string): number[] {
  let text = address
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text)
  if (dotted?.[1] !== undefined) {
    const [a = 0, b = 0, c = 0, d = 0] = dotted[1].split('.').map(Number)
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`
  }
  const [head = '', tail] = text.split('::')
  const read = (part: string) => (part === '' ? [] : part.split(':').map((group) => parseInt(group, 16)))
  const front = read(head)
  const back = tail === undefined ? [] : read(tail)
  return [...front, ...new Array<number>(8 - front.length - back.length).fill(0), ...back]
}

/** Zeroes all but the leading `bits` of groups of `width` bits. */
function keepBits(groups: number[], width: number, bits: number): number[] {
  return groups.map((group, i) => {
    const kept = Math.max(0, Math.min(width, bits - i * width))
    return kept === 0 ? 0 : group & (((1 << width) - 1) ^ ((1 << (width - kept)) - 1))
  })
}

/**
 * `address` with only its leading bits kept (the rest zero), for logs that
 * should tell networks apart but not people: `203.0.113.77` at 24 bits is
 * `203.0.113.0`, `2001:db8:1:2::5` at 48 is `2001:db8:1::`. Anything that is
 * not an IP address is returned as it is (callers pass normalised addresses).
 */
export function truncateAddress(address: string, prefix: AddressPrefix): string {
  const family = isIP(address)
  if (family === 4) {
    if (prefix.v4 >= 32) return address
    return keepBits(address.split('.').map(Number), 8, prefix.v4).join('.')
  }
  if (family === 6) {
    if (prefix.v6 >= 128) return address
    const groups = keepBits(ipv6Groups(address), 16, prefix.v6)
    return compressIpv6(groups)
  }
  return address
}

/** RFC 5952's text of eight groups: lower-case hex, the longest run of two or more zero groups as `::`. */
function compressIpv6(groups: number[]): string {
  let bestAt = -1
  let bestLength = 1
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++
      continue
    }
    let end = i
    while (end < 8 && groups[end] === 0) end++
    if (end - i > bestLength) {
      bestAt = i
      bestLength = end - i
    }
    i = end
  }
  const hex = groups.map((group) => group.toString(16))
  if (bestAt < 0) return hex.join(':')
  return `${hex.slice(0, bestAt).join(':')}::${hex.slice(bestAt + bestLength).join(':')}`
}
