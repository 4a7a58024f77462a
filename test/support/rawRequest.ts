import { request, type IncomingHttpHeaders } from 'node:http'

export interface RawAnswer {
  status: number
  headers: IncomingHttpHeaders
  body: string
}

/**
 * One request on a connection of its own, its target sent exactly as written:
 * fetch and the injector parse it as a WHATWG URL first, which resolves `..`
 * and turns `\` into `/`.
 */
export function sendRaw(port: number, method: string, path: string, headers: Record<string, string> = {}, body?: Buffer): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, agent: false, headers: { ...headers, ...(body !== undefined ? { 'content-length': String(body.length) } : {}) } })
    req.setTimeout(10_000, () => req.destroy(new Error(`${method} ${path}: no answer within 10 s`)))
    req.once('error', reject)
    req.once('response', (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => void (text += chunk))
      res.once('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }))
    })
    req.end(body)
  })
}
