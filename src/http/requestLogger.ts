import type { FastifyBaseLogger } from 'fastify'
import { levels, type Bindings, type ChildLoggerOptions } from 'pino'

/** A log method called with whatever a pino method takes, forwarded as it came. */
type Forwarded = (...args: unknown[]) => void

const LEVEL_VALUES: Readonly<Record<string, number>> = { ...levels.values, silent: Number.POSITIVE_INFINITY }

/** The numeric value of a level's name (an unknown name logs everything, as a mistake should not hide lines). */
function levelValue(level: string): number {
  return LEVEL_VALUES[level] ?? 0
}

/** Whether a logger at `level` writes the lines of `line` (e.g. a route at CHECK_LOG_LEVEL, Fastify's info lines). */
export function logsAt(level: string, line: string): boolean {
  return levelValue(line) >= levelValue(level)
}

/**
 * A request's logger that becomes a pino child only when a line is written
 * at or above its level. Fastify makes a child logger for every request
 * while logging is on; with pino's redaction, making one (bindings
 * serialised and redacted, the level set) cost the gateway's check several
 * microseconds, for a request that at CHECK_LOG_LEVEL writes no line at all.
 * A line below the level is dropped by one comparison, as pino's own no-op
 * method would; the bindings are worked out when the child is made, so the
 * line carries exactly what an eager child's would.
 */
export class DeferredLogger implements FastifyBaseLogger {
  private bound: FastifyBaseLogger | undefined
  private threshold: number

  constructor(
    private readonly parent: FastifyBaseLogger,
    private readonly bindings: () => Bindings,
    private readonly options: ChildLoggerOptions,
  ) {
    this.threshold = levelValue(options.level ?? parent.level)
  }

  /** The pino child, made on first use. */
  private logger(): FastifyBaseLogger {
    this.bound ??= this.parent.child(this.bindings(), this.options)
    return this.bound
  }

  private write(name: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace', args: unknown[]): void {
    if (levelValue(name) < this.threshold) return
    const logger = this.logger()
    ;(logger[name] as Forwarded).apply(logger, args)
  }

  get level(): string {
    return this.bound?.level ?? this.options.level ?? this.parent.level
  }

  set level(level: string) {
    this.logger().level = level
    this.threshold = levelValue(level)
  }

  fatal(...args: unknown[]): void {
    this.write('fatal', args)
  }

  error(...args: unknown[]): void {
    this.write('error', args)
  }

  warn(...args: unknown[]): void {
    this.write('warn', args)
  }

  info(...args: unknown[]): void {
    this.write('info', args)
  }

  debug(...args: unknown[]): void {
    this.write('debug', args)
  }

  trace(...args: unknown[]): void {
    this.write('trace', args)
  }

  silent(): void {}

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.logger().child(bindings, options)
  }
}
