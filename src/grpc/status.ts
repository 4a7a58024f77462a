import { Metadata, status, type ServiceError as GrpcError } from '@grpc/grpc-js'
import { errorTable, isServiceError, type ErrorCode } from '../domain/errors.js'
import { errorBody, type ErrorBody } from '../i18n/errorBody.js'
import type { Translate } from '../i18n/index.js'

/** The gRPC status of each HTTP status the error table answers with. */
const BY_HTTP_STATUS: Readonly<Record<number, status>> = {
  400: status.INVALID_ARGUMENT,
  401: status.UNAUTHENTICATED,
  403: status.PERMISSION_DENIED,
  404: status.NOT_FOUND,
  408: status.DEADLINE_EXCEEDED,
  413: status.RESOURCE_EXHAUSTED,
  429: status.RESOURCE_EXHAUSTED,
  503: status.UNAVAILABLE,
}

/** The gRPC status of an error of the table. */
export function grpcStatus(code: ErrorCode): status {
  return BY_HTTP_STATUS[errorTable[code].status] ?? status.INTERNAL
}

/** Anything thrown as the error code it is answered with: a bug is INTERNAL, its cause for the log only. */
export function errorCodeOf(error: unknown): { code: ErrorCode; params: Record<string, string | number> } {
  return isServiceError(error) ? { code: error.code, params: error.params } : { code: 'INTERNAL', params: {} }
}

/** The trailer that carries the service's response code beside the gRPC status. */
export const RESPONSE_CODE_TRAILER = 'aps-response-code'

/** A refusal as a gRPC error: the status, the localised text as its message, the response code in a trailer. */
export function grpcError(code: ErrorCode, t: Translate, params: Record<string, string | number> = {}): Partial<GrpcError> & { body: ErrorBody } {
  const body = errorBody(code, t, params)
  const metadata = new Metadata()
  metadata.set(RESPONSE_CODE_TRAILER, body.response_code)
  return { code: grpcStatus(code), details: body.response_text, metadata, body }
}
