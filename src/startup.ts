import { randomBytes } from 'node:crypto'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname } from 'node:path'
import { Type } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'
import {
  ConfigError,
  RouteMapEntrySchema,
  readSettings,
  type Config,
  type GeneratedKey,
  type JwtConfig,
  type Settings,
  type ShadowModelConfig,
  type ShadowSettings,
} from './config.js'
import { RouteMap, type RouteMapEntry } from './domain/routeMap.js'

/**
 * Start-up's part of the configuration: what the settings name but a file
 * holds or must hold. The runner and the command line call loadConfig();
 * reading the settings themselves (config.ts) touches no file.
 */

/** The environment's settings, with the generated token key made or read and the route map read and checked. */
export function loadConfig(source: Record<string, string | undefined> = process.env): Config {
  return prepareConfig(readSettings(source))
}

export function prepareConfig(settings: Settings): Config {
  const { jwt, routeMapPath, shadowModel, ...rest } = settings
  return {
    ...rest,
    jwt: jwt.mode === 'generated' ? generatedKey(jwt) : jwt,
    routeMap: routeMapPath === null ? null : readRouteMap(routeMapPath),
    shadowModel: shadowModel === null ? null : readShadowModel(shadowModel),
  }
}

/**
 * With no key configured, an embedded store keeps one random HS256 secret in
 * its data folder (made here, with the folder, on its first start; readable
 * by the owner only), so tokens survive restarts; an in-memory store gets a
 * fresh one per process.
 */
function generatedKey({ file }: GeneratedKey): JwtConfig {
  if (file === null) return { mode: 'secret', secret: randomBytes(32).toString('hex'), generated: true }
  mkdirSync(dirname(file), { recursive: true })
  try {
    writeFileSync(file, randomBytes(32).toString('hex'), { mode: 0o600, flag: 'wx' })
  } catch (error) {
    // Made by an earlier start (or a process starting beside this one): read it.
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
  }
  return { mode: 'secret', secret: readFileSync(file, 'utf8').trim(), generated: true }
}

/** Reads and checks the route map file: a bad file stops the start with a message naming the entry. */
function readRouteMap(path: string): RouteMapEntry[] {
  let parsed: unknown
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'))
  } catch (error) {
    throw new ConfigError(`ROUTE_MAP_PATH: cannot read ${path} as JSON: ${(error as Error).message}`)
  }
  const schema = Type.Array(RouteMapEntrySchema)
  const problems = [...Value.Errors(schema, parsed)].map((p) => `${p.path || '/'}: ${p.message}`)
  if (problems.length > 0) throw new ConfigError(`ROUTE_MAP_PATH ${path}: ${problems.slice(0, 5).join('; ')}`)
  const entries = parsed as RouteMapEntry[]
  try {
    new RouteMap(entries)
  } catch (error) {
    throw new ConfigError(`ROUTE_MAP_PATH ${path}: ${(error as Error).message}`)
  }
  return entries
}

/** The shadow model's text. A file that cannot be read does not stop the start: the service runs without a shadow, saying why. */
function readShadowModel(settings: ShadowSettings): ShadowModelConfig {
  try {
    return { ...settings, text: readFileSync(settings.path, 'utf8') }
  } catch (error) {
    return { ...settings, unreadable: `cannot read the shadow model at ${settings.path}: ${(error as Error).message}` }
  }
}
