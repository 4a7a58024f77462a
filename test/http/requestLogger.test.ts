import { pino } from 'pino'
import t from 'tap'
import { DeferredLogger } from '../../src/http/requestLogger.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('a logger in memory')

/** A pino logger writing its lines into an array. */
function capturing(level: string): { logger: pino.Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = []
  const logger = pino({ level, redact: { paths: ['secret'], censor: '[redacted]' } }, { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) })
  return { logger, lines }
}

t.test("a request's logger binds only when it writes a line, and the line is an eager child's", async (t) => {
  const { logger, lines } = capturing('info')
  let bound = 0
  const bindings = () => {
    bound++
    return { reqId: 'r-1', secret: 'hidden' }
  }
  const quiet = new DeferredLogger(logger, bindings, { level: 'warn' })
  quiet.info({ a: 1 }, 'below the route level')
  quiet.debug('below too')
  t.equal(bound, 0, 'no child is made for lines the level drops')
  t.same(lines, [])
  t.equal(quiet.level, 'warn')

  quiet.warn({ a: 2 }, 'at the level')
  quiet.error('above it')
  t.equal(bound, 1, 'the child is made once')
  t.match(lines, [
    { level: 40, reqId: 'r-1', secret: '[redacted]', a: 2, msg: 'at the level' },
    { level: 50, reqId: 'r-1', msg: 'above it' },
  ])

  const inherited = new DeferredLogger(logger, () => ({ reqId: 'r-2' }), {})
  t.equal(inherited.level, 'info', "without a level of its own, the parent's")
  inherited.info('written')
  inherited.child({ step: 'x' }).info('from a child')
  t.match(lines.slice(2), [{ reqId: 'r-2', msg: 'written' }, { reqId: 'r-2', step: 'x', msg: 'from a child' }])

  inherited.level = 'error'
  inherited.warn('now dropped')
  t.equal(lines.length, 4, 'a level set later is obeyed')
})
