/** What bench/grpc.ts and its sender process (bench/grpcLoad.ts) both send and report. */

/** An ext_authz Check as Envoy sends it for a GET the route map names. */
export const checkRequest = (token: string) => ({
  attributes: {
    request: {
      http: {
        method: 'GET',
        path: '/api/orders/42?expand=lines',
        headers: { ':authority': 'shop.example', ':method': 'GET', ':path': '/api/orders/42?expand=lines', authorization: `Bearer ${token}`, 'user-agent': 'bench', 'x-request-id': 'r-1' },
      },
    },
  },
})

/** Latency percentiles, in ms. */
export interface LatencySpread {
  p50: number
  p90: number
  p99: number
  max: number
}
