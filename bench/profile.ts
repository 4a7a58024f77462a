/**
 * The top frames by self time of a V8 CPU profile (`node --cpu-prof`): where
 * a server's microseconds go, summed per function and place.
 */
import { readFileSync } from 'node:fs'
import { relative } from 'node:path'

interface ProfileNode {
  id: number
  callFrame: { functionName: string; url: string; lineNumber: number }
  hitCount?: number
}

interface CpuProfile {
  nodes: ProfileNode[]
  startTime: number
  endTime: number
  samples: number[]
  timeDeltas: number[]
}

export interface Frame {
  name: string
  /** Share of all samples, idle included. */
  share: number
  /** Self time per request served while profiled, in microseconds. */
  microsPerRequest: number
}

/** Where a frame is: the file below the repository (or a package's name) and its line. */
function place(url: string, line: number): string {
  if (url === '') return ''
  const path = url.replace(/^file:\/\//, '')
  const inPackage = /node_modules\/((?:@[^/]+\/)?[^/]+)\/(.*)$/.exec(path)
  const where = inPackage !== null ? `${inPackage[1]}/${inPackage[2]}` : path.startsWith('node:') ? path : relative(process.cwd(), path)
  return `${where}:${line + 1}`
}

/**
 * The top frames of the samples taken between `from` and `to` (µs of the
 * monotonic clock, as `process.hrtime.bigint() / 1000n` reads it in any
 * process of the machine): the load alone, not the start-up before it.
 */
export function topFrames(file: string, from: number, to: number, requests: number, count = 10): Frame[] {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile
  const hitsOf = new Map<number, number>()
  let at = profile.startTime
  let total = 0
  profile.samples.forEach((id, i) => {
    at += profile.timeDeltas[i] ?? 0
    if (at < from || at > to) return
    hitsOf.set(id, (hitsOf.get(id) ?? 0) + 1)
    total++
  })
  if (total === 0) throw new Error('the profile has no sample in the load window')
  const micros = to - from
  const self = new Map<string, number>()
  for (const node of profile.nodes) {
    const hits = hitsOf.get(node.id) ?? 0
    if (hits === 0) continue
    const { functionName, url, lineNumber } = node.callFrame
    const key = `${functionName === '' ? '(anonymous)' : functionName} ${place(url, lineNumber)}`.trim()
    self.set(key, (self.get(key) ?? 0) + hits)
  }
  return [...self]
    .sort((a, b) => b[1] - a[1])
    .slice(0, count)
    .map(([name, hits]) => ({ name, share: hits / total, microsPerRequest: (hits / total) * micros / Math.max(1, requests) }))
}
