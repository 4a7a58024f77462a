/**
 * The fast path's reader of check-batch bodies (src/http/plainBatch.ts)
 * against what the route accepts (JSON.parse, then the route's schema
 * compiled as the app compiles it): over generated bodies, near the plain
 * form and mutated byte by byte, every body the reader takes is one the
 * route takes, with the same checks in the same order.
 */
import t from 'tap'
import { random } from '../support/seededRandom.js'
import { SPAN_FIELDS, newSpans, readPlainBatch } from '../../src/http/plainBatch.js'
import { BatchBody } from '../../src/http/routes/authz.js'
import { createValidatorCompiler } from '../../src/schemas/validation.js'

const spans = newSpans()

/** The reader's verdict on a body sent as UTF-8: the number of checks (-1: not the plain form) and the checks. */
function read(text: string): { count: number; checks: Array<{ obj: string; act: string; domain?: string }> } {
  const body = Buffer.from(text, 'utf8')
  const count = readPlainBatch(body, spans)
  const checks = Array.from({ length: Math.max(count, 0) }, (_, c) => {
    const [objAt, objEnd, actAt, actEnd, domainAt, domainEnd] = spans.subarray(c * SPAN_FIELDS, (c + 1) * SPAN_FIELDS)
    const at = (start: number | undefined, end: number | undefined) => body.toString('latin1', start, end)
    return { obj: at(objAt, objEnd), act: at(actAt, actEnd), ...((domainAt ?? -1) >= 0 ? { domain: at(domainAt, domainEnd) } : {}) }
  })
  return { count, checks }
}

const validate = createValidatorCompiler()({ schema: BatchBody, httpPart: 'body' }) as (value: unknown) => boolean

/** A JSON text written by hand: members as pairs, so keys may repeat or be escaped. */
type Raw = { text: string }
type Value = Raw | string | number | boolean | null | Value[] | Members
type Members = { members: Array<[string, Value]> }

const SPACES = ['', '', '', ' ', '\n', '\t', '\r\n', '  ', '\u00a0', '\f', '\v']
const GOOD_PARTS = ['orders', 'read', 'payouts', 'approve', 'a', 'z9', 'a.b-c_d', `o${'a'.repeat(63)}`]
const BAD_PARTS = ['', 'Orders', '9a', '-a', 'a b', 'ordérs', 'a\u0000', `o${'a'.repeat(64)}`, 'a"b', 'a\\b', 'a\nb', '_a', '.a']
const GOOD_DOMAINS = ['m1', 'M1', '9', 'global', 'A.b-c_1', `m${'1'.repeat(63)}`]
const BAD_DOMAINS = ['', '-m1', '_m', '.m', 'm 1', `m${'1'.repeat(64)}`, 'm\u00e9']

function bodies(count: number, seed: number): Array<{ text: string; plain: boolean }> {
  const { next, below, pick } = random(seed)
  const space = () => pick(SPACES)
  /** Written with JSON whitespace between tokens; with `breakSpace`, some of it not JSON's. */
  const write = (value: Value, breakSpace: boolean): string => {
    const ws = () => {
      const s = space()
      return breakSpace || !(s === '\u00a0' || s === '\f' || s === '\v') ? s : ''
    }
    if (typeof value === 'string') return JSON.stringify(value)
    if (typeof value !== 'object' || value === null) return JSON.stringify(value)
    if ('text' in value) return value.text
    if (Array.isArray(value)) return `[${ws()}${value.map((v) => write(v, breakSpace)).join(`${ws()},${ws()}`)}${ws()}]`
    return `{${ws()}${value.members.map(([k, v]) => `${k}${ws()}:${ws()}${write(v, breakSpace)}`).join(`${ws()},${ws()}`)}${ws()}}`
  }
  const key = (name: string) => JSON.stringify(name)
  const out: Array<{ text: string; plain: boolean }> = []
  for (let n = 0; n < count; n++) {
    const plain = { ok: true }
    const spoil = (chance: number) => {
      const spoilt = next() < chance
      if (spoilt) plain.ok = false
      return spoilt
    }
    const identifier = (good: readonly string[], bad: readonly string[]): Value => {
      if (spoil(0.04)) return pick<Value>([5, true, null, [], { members: [] }, { text: '"ord\\u0065rs"' }])
      return spoil(0.05) ? pick(bad) : pick(good)
    }
    const check = (): Value => {
      const members: Array<[string, Value]> = [
        [key('obj'), identifier(GOOD_PARTS, BAD_PARTS)],
        [key('act'), identifier(GOOD_PARTS, BAD_PARTS)],
      ]
      if (next() < 0.5) members.push([key('domain'), identifier(GOOD_DOMAINS, BAD_DOMAINS)])
      if (spoil(0.02)) members.splice(below(members.length), 1)
      if (spoil(0.02)) members.push([pick([key('obj'), key('act'), key('domain'), key('why'), '"\\u006fbj"', key('__proto__')]), 'orders'])
      for (let i = members.length - 1; i > 0; i--) {
        const j = below(i + 1)
        ;[members[i], members[j]] = [members[j] as [string, Value], members[i] as [string, Value]]
      }
      return { members }
    }
    const size = spoil(0.03) ? pick([0, 101, 102]) : 1 + below(next() < 0.1 ? 100 : 6)
    const checks: Value = spoil(0.02) ? pick<Value>([{ members: [] }, 'x', null]) : Array.from({ length: size }, check)
    const data: Members = { members: [[key('checks'), checks]] }
    if (spoil(0.03)) data.members.push(pick<[string, Value]>([[key('explain'), false], [key('user_id'), '3f0c4b7e-9a3b-4c7e-9d2a-1b2c3d4e5f60'], [key('min_revision'), 0], [key('x'), 1]]))
    if (spoil(0.02)) data.members.push([key('checks'), [{ members: [[key('obj'), 'a'], [key('act'), 'b']] }]])
    const top: Members = { members: [[key('command'), spoil(0.03) ? pick(['check', 'Check-batch', 'check-batch ']) : 'check-batch'], [key('data'), spoil(0.02) ? [] : data]] }
    if (spoil(0.02)) top.members.push(pick<[string, Value]>([[key('command'), 'check-batch'], [key('x'), 1], [key('data'), data]]))
    if (spoil(0.02)) top.members.splice(below(2), 1)
    if (next() < 0.5) top.members.reverse()
    const breakSpace = spoil(0.05)
    let text = write(top, breakSpace) + (spoil(0.02) ? pick([' x', '{}', ',', '\u0000']) : space() === '\n' ? '\n' : '')
    // Byte-level damage on top: any character anywhere.
    const mutations = spoil(0.3) ? 1 + below(3) : 0
    for (let m = 0; m < mutations; m++) {
      const at = below(text.length + 1)
      const c = pick(['{', '}', '[', ']', '"', ':', ',', '\\', ' ', 'a', 'A', '0', '-', 'é', '\u0000', '\n', 'u', ''])
      text = text.slice(0, at) + c + text.slice(at + (next() < 0.5 ? 1 : 0))
    }
    out.push({ text, plain: plain.ok && !breakSpace })
  }
  return out
}

t.test('every body the reader takes, the route takes, with the same checks', async (t) => {
  let taken = 0
  let plainCount = 0
  let plainMissed = 0
  const wrong: string[] = []
  for (const { text, plain } of bodies(30_000, 20261126)) {
    const { count, checks: visited } = read(text)
    if (plain) plainCount++
    if (count < 0) {
      if (plain) plainMissed++
      continue
    }
    taken++
    let parsed: { data?: { checks?: unknown } }
    try {
      parsed = JSON.parse(text) as typeof parsed
    } catch {
      wrong.push(text)
      continue
    }
    if (!validate(parsed)) {
      wrong.push(text)
      continue
    }
    // The same checks, each member compared whatever the order it was written in.
    const checks = (parsed.data?.checks ?? []) as Array<{ obj: string; act: string; domain?: string }>
    const same = (a: { obj: string; act: string; domain?: string }, b: { obj: string; act: string; domain?: string } | undefined) =>
      b !== undefined && a.obj === b.obj && a.act === b.act && a.domain === b.domain
    if (count !== checks.length || !checks.every((check, i) => same(check, visited[i]))) wrong.push(text)
  }
  t.same(wrong.slice(0, 5), [], 'no body taken that the route would refuse or read otherwise')
  t.ok(taken > 1000, `many bodies taken (${taken})`)
  t.equal(plainMissed, 0, `every body in the plain form taken (${plainCount} of them)`)
})

t.test('the bounds of the plain form', async (t) => {
  const count = (text: string) => read(text).count
  const body = (checks: unknown) => JSON.stringify({ command: 'check-batch', data: { checks } })
  const one = { obj: 'orders', act: 'read' }
  t.equal(count(body(Array.from({ length: 100 }, () => one))), 100, '100 checks')
  t.equal(count(body(Array.from({ length: 101 }, () => one))), -1, '101 checks')
  t.equal(count(body([])), -1, 'no checks')
  t.equal(count(body([{ obj: `o${'a'.repeat(63)}`, act: 'read' }])), 1, 'a 64-character identifier')
  t.equal(count(body([{ obj: `o${'a'.repeat(64)}`, act: 'read' }])), -1, 'a 65-character identifier')
  t.equal(count(body([{ obj: 'orders', act: 'read', domain: `M${'1'.repeat(63)}` }])), 1, 'a 64-character domain')
  t.equal(count(body([{ obj: 'orders', act: 'read', domain: `M${'1'.repeat(64)}` }])), -1, 'a 65-character domain')
  t.equal(count(`${body([one])} `), 1, 'space after the object')
  t.equal(count(`${body([one])} x`), -1, 'text after the object')
  t.equal(count(''), -1, 'nothing')
  t.same(read(body([{ act: 'b', obj: 'a' }, { domain: 'm1', obj: 'c', act: 'd' }])).checks, [{ obj: 'a', act: 'b' }, { obj: 'c', act: 'd', domain: 'm1' }], 'the checks in order, members in any order')
})
