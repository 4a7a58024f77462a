import type { IncomingMessage } from 'node:http'
import { isIP } from 'node:net'
import proxyAddr from '@fastify/proxy-addr'

/**
 * Which peers' `X-Forwarded-For` is believed (TRUST_PROXY):
 * - `false`: none; the client is the socket's peer;
 * - `{ hops }`: that many proxies stand in front of the service and every
 *   request comes through them (`true` is one hop);
 * - `{ addresses }`: the proxies' addresses or CIDRs (or proxy-addr's names
 *   `loopback`, `linklocal`, `uniquelocal`).
 * In every case the client is the rightmost address no trusted proxy wrote:
 * the one the outermost trusted proxy saw. Entries to its left are the
 * client's own claim and are never read.
 */
export type ProxyTrust = false | { hops: number } | { addresses: string[] }

/** Fastify's `trustProxy` option and proxy-addr's `trust`: is the address at this hop (0 = the socket's peer) a proxy we believe? */
export type TrustFunction = (address: string, hop: number) => boolean

/** Reads TRUST_PROXY: `false`/unset, `true`, a hop count, or a comma-separated list of addresses and CIDRs. Throws on anything else. */
export function parseProxyTrust(value: string | undefined): ProxyTrust {
  const text = value?.trim() ?? ''
  if (text === '' || text === 'false') return false
  if (text === 'true') return { hops: 1 }
  if (/^\d+$/.test(text)) {
    const hops = Number(text)
    if (hops === 0) return false
    if (hops > 100) throw new TypeError(`a hop count of ${text} is not a proxy chain`)
    return { hops }
  }
  return { addresses: parseAddressList(text) }
}

/**
 * The one reading of an address list (TRUST_PROXY's proxies,
 * CONNECTION_LIMIT_EXEMPT): comma-separated addresses, CIDR ranges and
 * proxy-addr's names (`loopback`, `linklocal`, `uniquelocal`). Throws on an
 * empty entry or one proxy-addr cannot read.
 */
export function parseAddressList(text: string): string[] {
  const entries = text.split(',').map((entry) => entry.trim())
  if (entries.some((entry) => entry === '')) throw new TypeError('an empty entry in the list of addresses')
  // Compiling checks every entry (proxy-addr throws naming a bad address or range).
  proxyAddr.compile(entries)
  return entries
}

/** Whether an address is in a list parseAddressList() read, as proxy-addr matches it (an IPv4-mapped IPv6 address as IPv4). */
export function addressListMatcher(entries: readonly string[]): (address: string) => boolean {
  const trusted = proxyAddr.compile([...entries])
  return (address) => trusted(address, 0)
}

/**
 * The trust function handed to Fastify (and proxy-addr). A hop count is
 * passed as a function, not a number: Fastify 5 treats a numeric
 * `trustProxy` as trusting nobody.
 */
export function trustFunction(trust: ProxyTrust): TrustFunction | false {
  if (trust === false) return false
  if ('hops' in trust) {
    const { hops } = trust
    return (_address, hop) => hop < hops
  }
  return proxyAddr.compile(trust.addresses)
}

/**
 * The client's address for a request that arrived from `peer` with this
 * `X-Forwarded-For`, as Fastify's `request.ip` works it out under the same
 * trust, then normalised (null unless it is an IP address).
 */
export function clientAddress(peer: string | undefined, forwardedFor: string | undefined, trust: ProxyTrust): string | null {
  const fn = trustFunction(trust)
  if (fn === false) return normaliseIp(peer)
  // proxy-addr reads only the socket's address and the header.
  const request = { socket: { remoteAddress: peer }, headers: forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor } } as unknown as IncomingMessage
  return normaliseIp(proxyAddr(request, fn))
}

/**
 * The address recorded for a caller (audit rows, login failures): an IP
 * address or null, never other text, since behind a proxy trusted by hop
 * count a header entry is taken as it is. An IPv4 address seen through an
 * IPv6 socket (`::ffff:10.0.0.1`) is written as plain IPv4, so one client
 * has one address; an IPv6 zone (`%eth0`) is dropped.
 */
export function normaliseIp(ip: string | undefined): string | null {
  if (ip === undefined) return null
  const trimmed = ip.trim()
  const address = trimmed.includes(':') ? trimmed.replace(/%.*$/, '') : trimmed
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address)
  if (mapped?.[1] !== undefined && isIP(mapped[1]) === 4) return mapped[1]
  return isIP(address) === 0 ? null : address.toLowerCase()
}
