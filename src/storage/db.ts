import { ServiceError } from '../domain/errors.js'
/**
 * The one database interface. PostgreSQL (pg) and PGlite both implement it;
 * nothing above the storage layer knows which one runs.
 */
export type Row = Record<string, unknown>

export interface QueryResult<R> {
  rows: R[]
  rowCount: number
}

export interface Queryable {
  query<R = Row>(text: string, params?: readonly unknown[]): Promise<QueryResult<R>>
  /**
   * The rows as arrays of column values in select order: no object per row
   * (a full load reads a million rows, and each object would be garbage).
   */
  queryArrays(text: string, params?: readonly unknown[]): Promise<unknown[][]>
  /** Runs a script of several statements without parameters (migrations). */
  exec(script: string): Promise<void>
  /**
   * `COPY (select) TO STDOUT` in text format, the bytes as they arrive: a row
   * a line, columns split by tabs, `\N` for null, backslash escapes. No
   * message or array per row on either side, which is what makes a full load
   * of a million rows fast. PostgreSQL only (PGlite streams no COPY out);
   * the select takes no parameters. A caller that stops early leaves the
   * rest read and dropped, so the connection is free for its next statement.
   */
  copyText?(select: string): AsyncIterable<Buffer>
  /**
   * `COPY target FROM STDIN` in text format, `lines` its data as written
   * (whole lines, escaped, each ending in a newline): rows without a
   * parameter or an array per row. PostgreSQL only (PGlite reads no COPY
   * from its client).
   */
  copyFrom?(target: string, lines: Iterable<string>): Promise<void>
}

export interface PoolStats {
  total: number
  idle: number
  /** Requests waiting for a free connection. */
  waiting: number
}

export interface TransactionOptions {
  /** The whole transaction commits within this many ms or not at all (default: the statement timeout). */
  budgetMs?: number | null
  /**
   * A statement without parameters that opens the transaction, sent in one
   * message with its BEGIN where the back end can (PostgreSQL): one round
   * trip fewer. Its rows are handed to the work.
   */
  opening?: string
}

/** A LISTEN on a connection of its own. */
export interface Subscription {
  /** Settles when the connection ends: with its error, or null when closed. */
  ended: Promise<Error | null>
  /** A round trip on the listening connection: a silent partition shows up here as a timeout. */
  ping(): Promise<void>
  close(): Promise<void>
}

export interface Database extends Queryable {
  readonly kind: 'postgres' | 'pglite'
  /** Runs `work` in one transaction: committed when it resolves, rolled back when it throws. */
  transaction<T>(work: (tx: Queryable, opened: Row[]) => Promise<T>, options?: TransactionOptions): Promise<T>
  /** Runs `work` reading one consistent snapshot (repeatable read, read only): for full loads. */
  snapshot<T>(work: (tx: Queryable) => Promise<T>): Promise<T>
  /** The pool's connections (PostgreSQL only), for metrics. */
  poolStats?(): PoolStats
  /** Notifications on `channel` (PostgreSQL only: the embedded store serves one process). */
  listen?(channel: string, onNotify: (payload: string) => void): Promise<Subscription>
  close(): Promise<void>
}

/** SQLSTATE of an error raised by either back end, if it carries one. */
export function sqlState(error: unknown): string | undefined {
  if (typeof error === 'object' && error !== null && 'code' in error) {
    const code = (error as { code: unknown }).code
    if (typeof code === 'string') return code
  }
  return undefined
}

/** Name of the constraint a unique or check violation broke, when the back end reports it. */
export function violatedConstraint(error: unknown): string | undefined {
  if (typeof error === 'object' && error !== null && 'constraint' in error) {
    const name = (error as { constraint: unknown }).constraint
    if (typeof name === 'string') return name
  }
  return undefined
}

export const UNIQUE_VIOLATION = '23505'

/**
 * The database could not be reached or did not answer in time: a connection
 * refused, dropped or timed out, a statement past its timeout, the server
 * shutting down. An everyday event in production, never a bug: the request
 * answers 503 (`901`) and the next one gets a fresh connection.
 */
export class StorageUnavailableError extends ServiceError {
  /**
   * Set when the failure hit the COMMIT itself: the server may or may not
   * have committed, but cannot commit after this time (ms since the epoch).
   */
  readonly inDoubtUntil: number | null
  constructor(cause: unknown, inDoubtUntil: number | null = null) {
    super('STORAGE_UNAVAILABLE')
    this.name = 'StorageUnavailableError'
    this.cause = cause
    this.inDoubtUntil = inDoubtUntil
  }
}

/** node-postgres's connection failures, which carry no SQLSTATE nor errno code. */
const CLIENT_CONNECTION_FAILURES =
  /Connection terminated|timeout exceeded when trying to connect|Query read timeout|is not queryable|connection error|Client was closed|Connection ended|write after end/i

/** SQLSTATEs that say the connection or the server failed, not the statement: class 08, shutdowns, timeouts, no room. */
const UNAVAILABLE_STATES = /^(08|57P0|53|58)|^57014$|^25P03$/

/**
 * Whether an error raised by a database call means "the database is unavailable" rather than "this
 * statement is wrong": a network-level error (no SQLSTATE: refused, reset,
 * terminated, timed out) or a server state of unavailability.
 */
export function isStorageUnavailable(error: unknown): boolean {
  if (error instanceof StorageUnavailableError) return true
  if (error instanceof ServiceError) return false
  const state = sqlState(error)
  if (state === undefined) {
    // pg's own connection failures carry no code, only these messages; anything else (e.g. a pool used after it was
    // ended) is a bug and stays a 500.
    return error instanceof Error && CLIENT_CONNECTION_FAILURES.test(error.message)
  }
  return UNAVAILABLE_STATES.test(state) || /^E[A-Z]+$/.test(state)
}
