/**
 * A real HTTP receiver for the decision log's http sink: collects the
 * events of every POST it accepts (gunzipped), and answers as `mode()`
 * says: `ok` (204), `fail` (500), `busy` (429 with Retry-After: 1), `hang`
 * (never answers), or `slow` (204 after 200 ms).
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { gunzipSync } from 'node:zlib'
import type { Test } from 'tap'

export type ReceiverMode = 'ok' | 'fail' | 'busy' | 'hang' | 'slow'

export interface Receiver {
  url: string
  /** Raw bodies of the accepted POSTs, decompressed. */
  bodies: string[]
  /** Events of the accepted POSTs, in order. */
  events: Array<{ decision_id: string; allowed: boolean }>
  /** POSTs received, answered or not. */
  posts: number
  /** When each POST arrived (ms since the epoch). */
  arrivals: number[]
  mode: ReceiverMode
}

export async function decisionReceiver(t: Test): Promise<Receiver> {
  const hanging: ServerResponse[] = []
  const receiver: Receiver = { url: '', bodies: [], events: [], posts: 0, arrivals: [], mode: 'ok' }
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = []
    request.on('data', (chunk: Buffer) => chunks.push(chunk))
    request.on('end', () => {
      receiver.posts++
      receiver.arrivals.push(Date.now())
      const mode = receiver.mode
      if (mode === 'hang') return void hanging.push(response)
      if (mode === 'fail') return void response.writeHead(500).end()
      if (mode === 'busy') return void response.writeHead(429, { 'retry-after': '1' }).end()
      const accept = () => {
        const text = gunzipSync(Buffer.concat(chunks)).toString()
        receiver.bodies.push(text)
        receiver.events.push(...(JSON.parse(text) as Receiver['events']))
        response.writeHead(204).end()
      }
      if (mode === 'slow') setTimeout(accept, 200)
      else accept()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/decisions`
  t.teardown(async () => {
    for (const response of hanging) response.destroy()
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  })
  return receiver
}
