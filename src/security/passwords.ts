import { hash, verify } from '@node-rs/argon2'

/**
 * argon2id with the OWASP minimum (19 MiB, 2 passes, 1 lane). docs/decisions.md
 * gives the measured cost per hash on the reference machine.
 */
export const ARGON2_PARAMETERS = {
  // Algorithm.Argon2id; the package exports it as a const enum, which isolated modules cannot read.
  algorithm: 2,
  memoryCost: 19456,
  timeCost: 2,
  parallelism: 1,
} as const

export interface PasswordHasher {
  hash(password: string): Promise<string>
  /** Verifies against `stored`, or against a fixed dummy hash when there is none, so both paths cost the same. */
  verify(stored: string | null, password: string): Promise<boolean>
}

export function createPasswordHasher(parameters = ARGON2_PARAMETERS): PasswordHasher {
  let dummy: Promise<string> | undefined
  return {
    hash: (password) => hash(password, parameters),
    async verify(stored, password) {
      dummy ??= hash('not-a-real-password-but-the-same-cost', parameters)
      const target = stored ?? (await dummy)
      try {
        const matches = await verify(target, password)
        return stored !== null && matches
      } catch {
        return false
      }
    },
  }
}
