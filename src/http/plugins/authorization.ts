import type { FastifyPluginAsync, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import fp from 'fastify-plugin'
import { ServiceError } from '../../domain/errors.js'
import { permissionName, type PermissionDeclaration } from '../../domain/permissions.js'
import { homeDomain, type Account, type PrincipalType } from '../../domain/principals.js'
import type { PermissionEngine } from '../../engine/engine.js'
import { asArray } from './authentication.js'

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The permission the route requires, checked in the caller's home domain. */
    permission?: PermissionDeclaration
    /** A route whose body says which permissions it needs: the caller must hold one of these to get past the guard, the command checks the rest. */
    anyPermission?: readonly PermissionDeclaration[]
    /** Principal types allowed at all (e.g. only system owners onboard merchants). */
    principalTypes?: readonly PrincipalType[]
  }
}

/**
 * The one guard: every route declares the permission it needs, and this hook
 * asks the engine (root bypass, then Casbin) in the caller's home domain.
 * Runs right after authentication, before the body is validated.
 */
/** The refusal of a caller that does not hold `permission` in its home domain (now: the engine reflects the latest revision), or null. */
export function permissionRefusal(engine: PermissionEngine, account: Account, permission: PermissionDeclaration): ServiceError | null {
  if (engine.decide(account, homeDomain(account), permission.obj, permission.act)) return null
  return new ServiceError('PERMISSION_DENIED', { permission: permissionName(permission) })
}

const authorizationPlugin: FastifyPluginAsync<{ engine: PermissionEngine }> = async (app, { engine }) => {
  // Each route gets its own guard when it is declared, with its permission
  // already read; routes that declare nothing get no guard.
  app.addHook('onRoute', (route) => {
    const { permission, principalTypes, anyPermission } = route.config ?? {}
    if (route.config?.public === true || (permission === undefined && principalTypes === undefined && anyPermission === undefined)) return
    const guard = (request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void => {
      const account = request.caller?.account
      if (account === undefined) return done(new ServiceError('UNAUTHENTICATED'))
      if (principalTypes !== undefined && !principalTypes.includes(account.principal_type)) {
        return done(new ServiceError('PRINCIPAL_TYPE_DENIED', { principal_type: account.principal_type }))
      }
      if (permission !== undefined) {
        const refusal = permissionRefusal(engine, account, permission)
        if (refusal !== null) return done(refusal)
      }
      if (anyPermission !== undefined && !anyPermission.some((p) => engine.decide(account, homeDomain(account), p.obj, p.act))) {
        return done(new ServiceError('PERMISSION_DENIED', { permission: anyPermission.map(permissionName).join(' | ') }))
      }
      done()
    }
    route.onRequest = [...asArray(route.onRequest), guard]
  })
}

export default fp(authorizationPlugin, { fastify: '5.x', name: 'authorization', dependencies: ['authentication'] })
