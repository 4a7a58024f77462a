/**
 * The edited model the benches set beside the shipped one: model.conf with
 * its matcher's `r.obj == p.obj && r.act == p.act` written the other way
 * round. It means the same, but it is no longer the shipped text, so the
 * service gives it the `candidates` path.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

export const EDITED_MATCHER = 'r.act == p.act && r.obj == p.obj'

const shippedText = readFileSync(new URL('../model.conf', import.meta.url), 'utf8')

/** The edited model's text. */
export function editedModelText(): string {
  const text = shippedText.replace('r.obj == p.obj && r.act == p.act', EDITED_MATCHER)
  if (text === shippedText) throw new Error('model.conf no longer holds the matcher the benches rewrite')
  return text
}

/** The edited model written to a directory of its own: its path, and a function that removes it. */
export function writeEditedModel(): { path: string; remove: () => void } {
  const text = editedModelText()
  const dir = mkdtempSync(join(tmpdir(), 'aps-edited-'))
  const path = join(dir, 'model.conf')
  writeFileSync(path, text)
  return { path, remove: () => rmSync(dir, { recursive: true, force: true }) }
}
