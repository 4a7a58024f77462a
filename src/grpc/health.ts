import { status, type sendUnaryData, type ServerUnaryCall, type ServerWritableStream, type UntypedServiceImplementation } from '@grpc/grpc-js'

/** grpc.health.v1.HealthCheckResponse.ServingStatus */
export const SERVING = 1
export const NOT_SERVING = 2

/** How often a Watch asks again whether the answer changed. */
const WATCH_INTERVAL_MS = 1000

export interface HealthOptions {
  /** What /readyz answers from: ready, or why not. */
  readiness: () => Promise<'ready' | 'unavailable' | 'stale'>
  /** The full names of the services offered; "" is the server as a whole. */
  services: readonly string[]
}

/** grpc.health.v1.Health: SERVING exactly when /readyz would answer ready. */
export function healthService({ readiness, services }: HealthOptions): UntypedServiceImplementation {
  const known = new Set(['', ...services])
  const servingStatus = async (): Promise<number> => ((await readiness()) === 'ready' ? SERVING : NOT_SERVING)

  const Check = (call: ServerUnaryCall<{ service?: string }, { status: number }>, callback: sendUnaryData<{ status: number }>): void => {
    if (!known.has(call.request.service ?? '')) return callback({ code: status.NOT_FOUND, details: 'unknown service' })
    servingStatus().then(
      (current) => callback(null, { status: current }),
      () => callback(null, { status: NOT_SERVING }),
    )
  }

  // Sends the status now and again each time it changes, until the client goes.
  const Watch = (call: ServerWritableStream<{ service?: string }, { status: number }>): void => {
    if (!known.has(call.request.service ?? '')) {
      call.write({ status: 3 })
      return
    }
    let last = -1
    const send = (): void => {
      servingStatus()
        .catch(() => NOT_SERVING)
        .then((current) => {
          if (current !== last && !call.cancelled) {
            last = current
            call.write({ status: current })
          }
        })
    }
    send()
    const timer = setInterval(send, WATCH_INTERVAL_MS)
    call.on('cancelled', () => clearInterval(timer))
    call.on('close', () => clearInterval(timer))
  }

  return { Check, Watch } as UntypedServiceImplementation
}
