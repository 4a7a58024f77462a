/**
 * What the tests run node with, for their own processes (package.json's
 * `tap.node-arg`) and for the servers and command lines they start:
 *
 * - `--liftoff-only`: V8 compiles WebAssembly with its baseline compiler
 *   (Liftoff) alone. Without it, every process that opens a PGlite store
 *   spends seconds of CPU on background threads re-optimising PostgreSQL's
 *   hot functions (TurboFan), work a short-lived test process never earns
 *   back: about a third of a typical test file's CPU (docs/testing.md). It
 *   changes how fast the code runs, never what it computes. The service
 *   itself runs without it.
 * - `--import tsx`: the TypeScript sources, as `npm start` runs them.
 *
 * Node refuses V8 flags in NODE_OPTIONS, so each spawn passes these itself.
 */
export const WASM_BASELINE_ONLY = '--liftoff-only'
export const TEST_NODE_ARGS: readonly string[] = [WASM_BASELINE_ONLY, '--import', 'tsx']

/**
 * Node's compile cache (`.ci/run` sets NODE_COMPILE_CACHE, docs/testing.md),
 * for the processes a test starts with an environment of its own: without
 * it each of them compiles tsx, Fastify, PGlite's glue and the service anew.
 */
export const COMPILE_CACHE_ENV: Readonly<Record<string, string>> =
  process.env.NODE_COMPILE_CACHE !== undefined ? { NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE } : {}
