/**
 * Statements built from parts, so that one round trip can carry what would
 * otherwise be several: each part numbers its parameters as it is written,
 * and data-modifying parts are joined in one WITH.
 */

/** A statement's parameters, numbered in the order the parts add them. */
export class Params {
  readonly values: unknown[] = []

  /** The placeholder of `value` (`$n`, with `cast` appended, e.g. `::text[]`). */
  add(value: unknown, cast = ''): string {
    this.values.push(value)
    return `$${this.values.length}${cast}`
  }
}

/**
 * `parts` (each `name AS (statement)`) and `final` as one statement. PostgreSQL
 * runs every data-modifying part exactly once, whether or not `final` reads
 * it, all on the statement's one snapshot: parts must not depend on each
 * other's rows.
 */
export function withParts(parts: readonly string[], final: string): string {
  return parts.length === 0 ? final : `WITH ${parts.join(',\n')}\n${final}`
}
