import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { ServiceError } from '../../domain/errors.js'
import { success } from '../envelope.js'
import { SuccessEnvelope } from '../../schemas/common.js'

const Status = SuccessEnvelope(Type.Object({ status: Type.String() }))

export const healthRoutes: FastifyPluginAsyncTypebox<{ readiness: () => Promise<'ready' | 'unavailable' | 'stale'> }> = async (
  app,
  { readiness },
) => {
  app.get(
    '/healthz',
    { config: { public: true }, schema: { tags: ['health'], response: { 200: Status } } },
    async () => success({ status: 'ok' }),
  )
  app.get(
    '/readyz',
    {
      config: { public: true },
      schema: { tags: ['health'], response: { 200: Status, 503: Type.Ref('ErrorEnvelope') } },
    },
    async () => {
      const state = await readiness()
      if (state === 'unavailable') throw new ServiceError('NOT_READY')
      if (state === 'stale') throw new ServiceError('POLICY_STALE')
      return success({ status: 'ready' })
    },
  )
}
