/**
 * npx tsx bench/hash.ts: the cost of one password hash (and one verify) with
 * the service's argon2id parameters, on this machine. Login and registration
 * pay it once per request; it is what bounds logins per core.
 */
import { cpus } from 'node:os'
import { ARGON2_PARAMETERS, createPasswordHasher } from '../src/security/passwords.js'

const ROUNDS = Number(process.env.BENCH_HASH_ROUNDS ?? 20)
const hasher = createPasswordHasher()

async function time(work: () => Promise<unknown>): Promise<number[]> {
  await work() // warm-up: the first call allocates the memory pool
  const samples: number[] = []
  for (let i = 0; i < ROUNDS; i++) {
    const start = performance.now()
    await work()
    samples.push(performance.now() - start)
  }
  return samples
}

function summary(name: string, samples: number[]): string {
  const sorted = [...samples].sort((a, b) => a - b)
  const mean = samples.reduce((sum, s) => sum + s, 0) / samples.length
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN
  return `${name}: mean ${mean.toFixed(1)} ms, median ${at(0.5).toFixed(1)} ms, min ${at(0).toFixed(1)} ms, max ${at(1).toFixed(1)} ms (${samples.length} runs)`
}

const stored = await hasher.hash('correct horse battery staple')
const hashes = await time(() => hasher.hash('correct horse battery staple'))
const verifies = await time(() => hasher.verify(stored, 'correct horse battery staple'))

const { memoryCost, timeCost, parallelism } = ARGON2_PARAMETERS
process.stdout.write(
  [
    `argon2id m=${memoryCost} KiB, t=${timeCost}, p=${parallelism} on ${cpus()[0]?.model.trim() ?? 'unknown CPU'} (${cpus().length} cores), Node ${process.version}`,
    summary('hash', hashes),
    summary('verify', verifies),
    '',
  ].join('\n'),
)
