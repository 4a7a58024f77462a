import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyRequest } from 'fastify'
import { changeFilter, changeStreamStart, listChanges } from '../../commands/listChanges.js'
import type { Service } from '../../compose.js'
import { ServiceError } from '../../domain/errors.js'
import { routePermissions } from '../../domain/permissions.js'
import { ChangeHub } from '../../replica/changeHub.js'
import { ChangesPage, ChangesQuery, ChangeStreamQuery } from '../../schemas/changes.js'
import { bearer, responses } from '../../schemas/common.js'
import { ChangeStreams, type StreamCaller } from '../changeStream.js'
import { mapServiceError } from '../errors.js'
import { success } from '../envelope.js'
import { callerOf, credentialsRule, tokenStandingNow, type CredentialsRule } from '../plugins/authentication.js'
import { permissionRefusal } from '../plugins/authorization.js'
import { hijackedAnswerHeaders } from '../serviceHeaders.js'

/** The change stream (CONTRACT 18): a poll of committed changes after a revision, and the same items as Server-Sent Events. */
export const changeRoutes: FastifyPluginAsyncTypebox<{ ctx: Service }> = async (app, { ctx }) => {
  const current = credentialsRule(ctx.config.jwt.mode)
  const streams = new ChangeStreams(ctx.db, new ChangeHub(ctx.db, ctx.replica, app.log), ctx.config.changeStream)
  // Streams never end by themselves: at shutdown they end before the server waits for its connections.
  app.addHook('preClose', (done) => {
    streams.closeAll()
    done()
  })

  app.get(
    '/v2/admin/changes',
    {
      config: { permission: routePermissions.permissionRead },
      schema: { tags: ['changes'], security: bearer, querystring: ChangesQuery, response: responses(200, ChangesPage, [410]) },
    },
    async (request) => success(await listChanges(ctx, callerOf(request), request.query)),
  )

  app.get(
    '/v2/admin/changes/stream',
    {
      config: { permission: routePermissions.permissionRead },
      schema: {
        tags: ['changes'],
        security: bearer,
        querystring: ChangeStreamQuery,
        headers: Type.Object({ 'last-event-id': Type.Optional(Type.String({ maxLength: 64 })) }),
        response: { ...responses(200, Type.Null(), [410, 429]), 200: { content: { 'text/event-stream': { schema: Type.String() } } } },
      },
    },
    async (request, reply) => {
      const caller = callerOf(request)
      const slot = streams.reserve(request.ip)
      try {
        const cursor = await changeStreamStart(ctx, { after: request.query.after, lastEventId: request.headers['last-event-id'] })
        const headers = hijackedAnswerHeaders(
          reply,
          {
            'content-type': 'text/event-stream; charset=utf-8',
            'cache-control': 'no-store',
            // nginx and Caddy would otherwise hold events back in their buffers.
            'x-accel-buffering': 'no',
          },
          ctx.replica,
        )
        void reply.hijack()
        streams.start(slot, reply.raw, headers, cursor, changeFilter(caller, request.query.domain), streamCaller(ctx, request, current))
      } catch (error) {
        slot.release()
        throw error
      }
    },
  )
}

/** The stream's caller asked as a new request would be: its token as authentication checks it, then the route's permission. */
function streamCaller(ctx: Service, request: FastifyRequest, current: CredentialsRule): StreamCaller {
  const claims = request.claims
  if (claims === null) throw new ServiceError('UNAUTHENTICATED')
  return {
    refusal: () => {
      const standing = tokenStandingNow(claims, ctx.accounts, current, Date.now())
      if ('refused' in standing) return new ServiceError(standing.refused)
      return permissionRefusal(ctx.engine, standing.account, routePermissions.permissionRead)
    },
    envelope: (error) => mapServiceError(error, request.t).body,
  }
}
