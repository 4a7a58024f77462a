/**
 * The address recorded for a caller. Fastify's `request.ip` already honours
 * TRUST_PROXY (a forged X-Forwarded-For from an untrusted peer is ignored);
 * here an IPv4 address seen through an IPv6 socket (`::ffff:10.0.0.1`) is
 * written as plain IPv4, so one client has one address in the audit trail.
 */
export function normaliseIp(ip: string | undefined): string | null {
  if (ip === undefined || ip === '') return null
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(ip)
  return mapped?.[1] ?? ip.toLowerCase()
}
