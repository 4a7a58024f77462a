/**
 * The latency rows of bench/grpc.ts sent by h2load (Debian's
 * `nghttp2-client`), a load generator in C on libev: unlike a Node sender,
 * it has no garbage collector or event loop of its own to stall, so the
 * tail it reports is the server's (and the loopback's) rather than the
 * sender's. It sends the ext_authz Check as gRPC frames: a POST to the
 * method's path with `content-type: application/grpc` and `te: trailers`,
 * the body a file holding the length-prefixed message. It reads each
 * answer whole (headers, message, trailers) but not its gRPC status: the
 * closed loops before it check that every answer is the one expected.
 */
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { LatencySpread } from './grpcRequests.js'

const H2LOAD = process.env.H2LOAD ?? 'h2load'

/** Whether h2load can be run here. */
export function h2loadAvailable(): boolean {
  return spawnSync(H2LOAD, ['--version'], { stdio: 'ignore' }).status === 0
}

/** One gRPC message as it goes on the wire: not compressed, its length in four bytes, then the message. */
export function grpcFrame(message: Buffer): Buffer {
  const frame = Buffer.alloc(5 + message.length)
  frame.writeUInt32BE(message.length, 1)
  message.copy(frame, 5)
  return frame
}

export interface H2loadRun {
  /** From each call's send to the end of its answer, ms. */
  spread: LatencySpread
  /**
   * From each call's due time to the end of its answer, ms: the k-th call
   * sent is due at the first send plus k calls at the rate asked. A call
   * h2load holds back (its connection's streams all in flight, or h2load
   * itself late) counts the wait, which the send-to-answer figure hides.
   */
  fromDue: LatencySpread
  calls: number
  /** Calls still unanswered when the run ended (h2load logs them with status 0): counted in the spread with the time they had waited, a lower bound. */
  unanswered: number
  /**
   * How evenly the calls went out: the share of calls sent within BURST_US
   * of the one before (on any connection), and the most calls sent in one
   * such run. At an even send each call has its own moment; in a burst
   * the last call's figure also holds the server's work on the others.
   */
  bursts: { shared: number; largest: number }
}

/** Sends this close together (µs, h2load's log's clock) count as one burst. */
const BURST_US = 50

/** Where h2load sent the calls of `starts` (its log's send times, µs), as H2loadRun's `bursts`. */
export function burstsOf(starts: Float64Array): H2loadRun['bursts'] {
  const sorted = starts.slice().sort()
  let shared = 0
  let run = 1
  let largest = 1
  for (let i = 1; i < sorted.length; i++) {
    if ((sorted[i] as number) - (sorted[i - 1] as number) < BURST_US) {
      shared++
      largest = Math.max(largest, ++run)
    } else run = 1
  }
  return { shared: shared / Math.max(1, sorted.length), largest }
}

/** How h2load spreads a rate: `connections` connections, each allowed `streams` calls in flight. */
export interface H2loadShape {
  connections: number
  streams: number
}

function spreadOf(values: Float64Array): LatencySpread {
  const sorted = values.slice().sort()
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))] as number
  return { p50: at(0.5), p90: at(0.9), p99: at(0.99), max: at(1) }
}

/**
 * `message` sent to `path` on 127.0.0.1:`port` at `rate` calls a second for
 * `seconds` (after a second's warm-up), spread over `shape`'s connections
 * (h2load's --rps is each connection's share), each allowed `streams`
 * calls in flight so that a late answer does not hold back the next send.
 */
export async function h2loadAtRate(port: number, path: string, message: Buffer, rate: number, seconds: number, shape: H2loadShape): Promise<H2loadRun> {
  const dir = mkdtempSync(join(tmpdir(), 'aps-h2load-'))
  try {
    const body = join(dir, 'body')
    const log = join(dir, 'log')
    writeFileSync(body, grpcFrame(message))
    const args = [
      ...['-c', String(shape.connections), '-t', '1', '-m', String(shape.streams)],
      `--rps=${Math.max(1, Math.round(rate / shape.connections))}`,
      ...['-D', String(seconds), '--warm-up-time=1'],
      ...['-d', body, '-H', 'content-type: application/grpc', '-H', 'te: trailers'],
      `--log-file=${log}`,
      `http://127.0.0.1:${port}${path}`,
    ]
    const child = spawn(H2LOAD, args, { stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()))
    child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()))
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve))
    if (code !== 0) throw new Error(`h2load exited with ${code}: ${out.slice(-2000)}`)
    const rows = readFileSync(log, 'utf8').trim().split('\n')
    const latencies = new Float64Array(rows.length)
    const starts = new Float64Array(rows.length)
    let unanswered = 0
    rows.forEach((row, i) => {
      const [startText, statusText, micros] = row.split('\t')
      starts[i] = Number(startText)
      if (statusText === '0') unanswered++
      else if (statusText !== '200') throw new Error(`h2load: an answer with HTTP status ${statusText}`)
      latencies[i] = Number(micros) / 1000
    })
    const perSecond = Math.max(1, Math.round(rate / shape.connections)) * shape.connections
    const order = Array.from(starts.keys()).sort((a, b) => (starts[a] as number) - (starts[b] as number))
    const first = starts[order[0] ?? 0] ?? 0
    const fromDue = new Float64Array(rows.length)
    order.forEach((i, k) => (fromDue[k] = (latencies[i] as number) + Math.max(0, ((starts[i] as number) - first - (k * 1e6) / perSecond) / 1000)))
    return { spread: spreadOf(latencies), fromDue: spreadOf(fromDue), calls: rows.length, unanswered, bursts: burstsOf(starts) }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}
