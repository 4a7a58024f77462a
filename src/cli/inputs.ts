import { parseArgs } from 'node:util'
import { Type, type TObject } from '@sinclair/typebox'
import type { ErrorObject } from 'ajv'
import { createLocalizer } from '../i18n/index.js'
import { Email, MerchantDisplayName, MerchantId, Name, Password, Phone } from '../schemas/common.js'
import { createValidatorCompiler, localiseValidation } from '../schemas/validation.js'

/** A usage mistake (unknown option, missing or invalid value): exit code 2. */
export class UsageError extends Error {}

type StringOptions = Record<string, { type: 'string' }>

/** Parses `--name value` options strictly; `required` ones must be present and not empty. */
export function parseOptions<T extends StringOptions>(
  args: string[],
  spec: T,
  required: ReadonlyArray<keyof T & string> = [],
): Record<keyof T & string, string | undefined> {
  let values: Record<string, string | undefined>
  try {
    values = parseArgs({ args, options: spec, strict: true, allowPositionals: false }).values as Record<string, string | undefined>
  } catch (error) {
    throw new UsageError((error as Error).message)
  }
  for (const name of required) {
    if (values[name] === undefined || values[name] === '') throw new UsageError(`--${name} is required`)
  }
  return values as Record<keyof T & string, string | undefined>
}

// The API's own schema atoms, compiled by the API's own validator: the command
// line accepts exactly what the HTTP endpoints accept.
const compile = createValidatorCompiler()
const english = createLocalizer('en').translator('en')

function validator(schema: TObject): (input: Record<string, unknown>) => void {
  const validate = compile({ schema, httpPart: 'body' }) as ((data: unknown) => boolean) & { errors?: ErrorObject[] | null }
  return (input) => {
    const defined = Object.fromEntries(Object.entries(input).filter(([, v]) => v !== undefined))
    if (validate(defined)) return
    const problems = localiseValidation(validate.errors ?? [], english)
    throw new UsageError(problems.map((p) => `--${p.field.replace(/_/g, '-')} ${p.message}`).join('; '))
  }
}

export const checkBootstrapInput = validator(Type.Object({ email: Email, password: Password, name: Type.Optional(Name) }))

export const checkOnboardInput = validator(
  Type.Object({
    merchant_id: MerchantId,
    email: Email,
    password: Password,
    name: Type.Optional(Name),
    phone: Type.Optional(Phone),
    display_name: Type.Optional(MerchantDisplayName),
  }),
)

const TTL_UNITS = { '': 1, s: 1, m: 60, h: 3600, d: 86400 } as const
const MAX_TTL_SECONDS = 365 * 86400

/** `30m`, `1h`, `2d`, `45s` or a plain number of seconds; from one second to a year. */
export function parseTtl(text: string): number {
  const match = /^(\d{1,9})([smhd]?)$/.exec(text.trim())
  if (match === null) throw new UsageError(`--ttl must look like 30m, 1h, 2d or a number of seconds, not "${text}"`)
  const seconds = Number(match[1]) * TTL_UNITS[match[2] as keyof typeof TTL_UNITS]
  if (seconds < 1) throw new UsageError('--ttl must be at least one second')
  if (seconds > MAX_TTL_SECONDS) throw new UsageError('--ttl must be at most 365d')
  return seconds
}
