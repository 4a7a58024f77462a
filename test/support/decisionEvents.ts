import type { DecisionEvent } from '../../src/decisionLog/event.js'
import type { Account } from '../../src/domain/principals.js'

/** A whole decision event about `account`, as the decision log writes one; `overrides` changes any field. */
export function decisionEvent(account: Pick<Account, 'id' | 'principal_type' | 'merchant_id' | 'sub_role_code'>, overrides: Partial<DecisionEvent> = {}): DecisionEvent {
  const domain = account.merchant_id ?? 'global'
  return {
    decision_id: `d-${Math.random().toString(36).slice(2, 12)}`,
    time: new Date().toISOString().replace('Z', '000Z'),
    source: 'check',
    subject: { user_id: account.id, principal_type: account.principal_type, merchant_id: account.merchant_id, sub_role_code: account.sub_role_code },
    domain,
    obj: 'orders',
    act: 'refund',
    allowed: false,
    reason: { kind: 'none' },
    policy_revision: 1,
    model_id: '0123456789ab',
    replica: 'test',
    request_id: 'req-test',
    client_ip: '192.0.2.0',
    ...overrides,
  }
}
