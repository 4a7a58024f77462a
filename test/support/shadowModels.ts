import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { repositoryRoot } from './serverProcess.js'

/** The shipped model, as platform engineers start their edits from it. */
export const shippedModelText = readFileSync(join(repositoryRoot, 'model.conf'), 'utf8')

/**
 * A model change worth shadowing: whoever may edit a thing (`write`) may
 * also view it (`read`). It gives every decision of model.decisions (none
 * names `write`), so it is admitted, and it disagrees with the live model on
 * `products:read` for a holder of `products:write` only.
 */
export const writeImpliesReadModel = shippedModelText.replace('r.act == p.act', '(r.act == p.act || (r.act == "read" && p.act == "write"))')
if (writeImpliesReadModel === shippedModelText) throw new Error('the shipped matcher no longer reads r.act == p.act: update the edited model')
