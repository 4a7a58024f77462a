import { request, type IncomingMessage } from 'node:http'

export interface SseEvent {
  id: string | undefined
  event: string | undefined
  data: string
}

/** One Server-Sent Events connection, read as it arrives: its events, its comment lines, whether it ended. */
export interface SseConnection {
  status: number
  headers: IncomingMessage['headers']
  /** The body of a refusal (not a stream). */
  body: string
  events: SseEvent[]
  comments: string[]
  ended: boolean
  /** The server ended the stream cleanly (its last chunk came), rather than the connection breaking. */
  completed: boolean
  response: IncomingMessage
  close(): void
  /** Resolves once `condition` holds, or rejects after `ms`. */
  until(condition: (c: SseConnection) => boolean, ms?: number): Promise<void>
}

/** Opens GET `path` on a listening server with a bearer token, and parses the stream. */
export function openSse(port: number, path: string, token: string, headers: Record<string, string> = {}): Promise<SseConnection> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream', ...headers } })
    req.on('error', reject)
    req.on('response', (response) => {
      response.setEncoding('utf8')
      let buffer = ''
      const connection: SseConnection = {
        status: response.statusCode ?? 0,
        headers: response.headers,
        body: '',
        events: [],
        comments: [],
        ended: false,
        completed: false,
        response,
        close: () => req.destroy(),
        until: async (condition, ms = 10_000) => {
          const start = Date.now()
          while (!condition(connection)) {
            if (Date.now() - start > ms) throw new Error(`SSE condition not met within ${ms} ms (${connection.events.length} events)`)
            await new Promise((r) => setTimeout(r, 5))
          }
        },
      }
      response.on('data', (chunk: string) => {
        if (connection.status !== 200) {
          connection.body += chunk
          return
        }
        buffer += chunk
        for (let end = buffer.indexOf('\n\n'); end !== -1; end = buffer.indexOf('\n\n')) {
          const block = buffer.slice(0, end)
          buffer = buffer.slice(end + 2)
          const event: SseEvent = { id: undefined, event: undefined, data: '' }
          let isEvent = false
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) connection.comments.push(line.slice(1).trim())
            else if (line.startsWith('id: ')) [event.id, isEvent] = [line.slice(4), true]
            else if (line.startsWith('event: ')) [event.event, isEvent] = [line.slice(7), true]
            else if (line.startsWith('data: ')) [event.data, isEvent] = [line.slice(6), true]
          }
          if (isEvent) connection.events.push(event)
        }
      })
      const ended = () => {
        connection.ended = true
      }
      response.on('end', () => {
        connection.completed = true
        ended()
      })
      response.on('close', ended)
      response.on('error', ended)
      resolve(connection)
    })
    req.end()
  })
}
