/**
 * `npm run openapi`: writes openapi.json and docs/api.md from the real app,
 * over a throwaway in-memory database, and docs/errors.md from the error
 * table. The configuration is fixed here, not
 * read from the environment, so the files hold nothing of this machine.
 */
import { randomBytes } from 'node:crypto'
import { mkdir, writeFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { buildService } from '../src/compose.js'
import { loadConfig } from '../src/startup.js'
import { GENERATED_FILES, generateFiles } from '../src/http/openapi/generate.js'
import { openPGlite } from '../src/storage/pglite.js'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const config = loadConfig({ DATABASE_URL: 'pglite://memory', JWT_SECRET: randomBytes(32).toString('hex'), LOG_LEVEL: 'silent' })
const db = await openPGlite(null)
try {
  const service = await buildService(config, { db, skipFirstAdmin: true, follow: false })
  try {
    const files = await generateFiles(service)
    for (const name of GENERATED_FILES) {
      const path = join(root, name)
      await mkdir(dirname(path), { recursive: true })
      await writeFile(path, files[name])
      process.stdout.write(`wrote ${name}\n`)
    }
  } finally {
    await service.close()
  }
} finally {
  await db.close()
}
