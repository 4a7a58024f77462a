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
  /** Runs a script of several statements without parameters (migrations). */
  exec(script: string): Promise<void>
}

export interface Database extends Queryable {
  readonly kind: 'postgres' | 'pglite'
  /** Runs `work` in one transaction: committed when it resolves, rolled back when it throws. */
  transaction<T>(work: (tx: Queryable) => Promise<T>): Promise<T>
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
