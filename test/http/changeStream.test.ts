/**
 * How a change stream writes to its connection: the events a delivery hands
 * it (a shared transaction's revision holds dozens) go out in one write, not
 * one write (a system call, a chunk) per event.
 */
import { EventEmitter } from 'node:events'
import type { ServerResponse } from 'node:http'
import t from 'tap'
import { ChangeStreams } from '../../src/http/changeStream.js'
import type { ChangeHub, ChangeSubscriber } from '../../src/replica/changeHub.js'
import type { ListedChange } from '../../src/storage/changeItems.js'
import { buildTestApp } from '../helper.js'
import { eventually } from '../support/eventually.js'

/** A response that records each write. */
function recordingResponse(): { res: ServerResponse; writes: string[] } {
  const writes: string[] = []
  const res = Object.assign(new EventEmitter(), {
    writableLength: 0,
    socket: null,
    writeHead: () => res,
    write: (text: string) => writes.push(text) > 0,
    end: () => res.emit('close'),
  })
  return { res: res as unknown as ServerResponse, writes }
}

t.test('the items of one delivery go to the stream in one write, each its own event', async (t) => {
  const ta = await buildTestApp(t)
  let subscriber: ChangeSubscriber | null = null
  const hub = {
    subscribe: (s: ChangeSubscriber) => {
      subscriber = s
      return () => undefined
    },
  } as unknown as ChangeHub
  const streams = new ChangeStreams(ta.service.db, hub, { heartbeatMs: 60_000, maxMs: 60_000, bufferBytes: 1 << 20, perAddress: 1 })
  t.teardown(() => streams.closeAll())
  const { res, writes } = recordingResponse()
  const start = ta.service.replica.revision
  const caller = {
    refusal: () => null,
    envelope: () => {
      throw new Error('never refused here')
    },
  }
  streams.start(streams.reserve('127.0.0.1'), res, {}, { revision: start, index: 0 }, { audience: null, domain: null, upTo: null }, caller)
  // Live once its catch-up read (nothing after `start`) is done: a delivery then goes straight out.
  const item = (index: number): ListedChange => ({ revision: start + 1, index, time: new Date(0).toISOString(), kind: 'role_grant', domain: 'global', sub_role: `r${index}`, obj: 'reports', act: 'read', actor_id: 'root' })
  t.ok(await eventually(() => subscriber !== null), 'the stream subscribed')
  const opened = writes.length
  await eventually(() => {
    ;(subscriber as ChangeSubscriber | null)?.deliver([0, 1, 2].map((i) => ({ audience: null, item: item(i) })))
    return writes.length > opened
  })
  const sent = writes.slice(opened)
  t.equal(sent.length, 1, 'one write for the three items')
  const ids = (sent[0] ?? '').split('\n').filter((line) => line.startsWith('id: '))
  t.same(ids, ['id: ' + String(start + 1) + '.0', 'id: ' + String(start + 1) + '.1', 'id: ' + String(start + 1) + '.2'], 'each item its own event, in order')
})
