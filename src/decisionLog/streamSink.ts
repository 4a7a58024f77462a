import { once } from 'node:events'
import type { Writable } from 'node:stream'
import { createStream } from 'rotating-file-stream'
import type { DecisionEvent, DecisionSink } from './event.js'

/** Events as newline-delimited JSON, one write per batch. */
export function ndjson(events: readonly DecisionEvent[]): string {
  let text = ''
  for (const event of events) text += `${JSON.stringify(event)}\n`
  return text
}

/** Writes a batch and settles when the stream took it (a full stream's backpressure is the pipeline's to wait on). */
function writeTo(stream: Writable, text: string): Promise<void> {
  return new Promise((resolve, reject) => {
    stream.write(text, (error) => (error ? reject(error) : resolve()))
  })
}

/** `stdout`: one JSON line per event on the process's standard output (or the stream given, in tests). */
export function stdoutSink(stream: Writable = process.stdout): DecisionSink {
  return {
    name: 'stdout',
    write: (events) => writeTo(stream, ndjson(events)),
    // The process's own stream stays open for its logger.
    close: async () => undefined,
  }
}

export interface FileSinkOptions {
  /** A file grows to this many bytes before it is rotated. */
  maxBytes: number
  /** Rotated files kept beside the current one (`<name>.1` newest … `<name>.<n>`). */
  maxFiles: number
}

/**
 * `file:<path>`: newline-delimited JSON, rotated by size and count with
 * rotating-file-stream's classic scheme (the current file keeps its name;
 * rotated ones are numbered, the oldest removed).
 */
export function fileSink(path: string, { maxBytes, maxFiles }: FileSinkOptions): DecisionSink {
  const slash = path.lastIndexOf('/')
  const name = path.slice(slash + 1)
  const stream = createStream(name, { path: slash < 0 ? '.' : path.slice(0, slash) || '/', size: `${maxBytes}B`, rotate: maxFiles })
  let failed: Error | null = null
  // A stream error (a full disk, a removed folder) fails the writes; the pipeline retries them.
  stream.on('error', (error) => {
    failed = error
  })
  return {
    name: 'file',
    async write(events) {
      if (failed !== null) throw failed
      await writeTo(stream, ndjson(events))
    },
    async close() {
      stream.end()
      if (!stream.closed && failed === null) await once(stream, 'finish')
    },
  }
}
