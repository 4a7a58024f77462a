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
  calls: number
  /** Calls still unanswered when the run ended (h2load logs them with status 0): counted in the spread with the time they had waited, a lower bound. */
  unanswered: number
}

/**
 * `message` sent to `path` on 127.0.0.1:`port` at `rate` calls a second for
 * `seconds` (after a second's warm-up), spread over `connections`
 * connections, each allowed 64 calls in flight so that a late answer does
 * not hold back the next send.
 */
export async function h2loadAtRate(port: number, path: string, message: Buffer, rate: number, seconds: number, connections: number): Promise<H2loadRun> {
  const dir = mkdtempSync(join(tmpdir(), 'aps-h2load-'))
  try {
    const body = join(dir, 'body')
    const log = join(dir, 'log')
    writeFileSync(body, grpcFrame(message))
    const args = [
      ...['-c', String(connections), '-t', '1', '-m', '64'],
      `--rps=${Math.max(1, Math.round(rate / connections))}`,
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
    let unanswered = 0
    rows.forEach((row, i) => {
      const [, statusText, micros] = row.split('\t')
      if (statusText === '0') unanswered++
      else if (statusText !== '200') throw new Error(`h2load: an answer with HTTP status ${statusText}`)
      latencies[i] = Number(micros) / 1000
    })
    latencies.sort()
    const at = (q: number): number => latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * q))] as number
    return { spread: { p50: at(0.5), p90: at(0.9), p99: at(0.99), max: at(1) }, calls: rows.length, unanswered }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}
