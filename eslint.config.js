import js from '@eslint/js'
import tseslint from 'typescript-eslint'

// The layers of src/, each with the folders and root files it may import
// from (docs/architecture.md). An import from anything else in src/ fails
// lint: a layer never reaches up. compose.ts is the one file that builds
// every layer; the runner (http) and the command line (cli) start from it.
const FOLDERS = ['domain', 'storage', 'security', 'engine', 'replica', 'commands', 'modelCheck', 'i18n', 'schemas', 'decisionLog', 'http', 'cli', 'grpc']
const ROOT_FILES = ['config', 'startup', 'compose', 'modelGate', 'startNotice']
const FRONT_SHARED = ['domain', 'storage', 'security', 'engine', 'replica', 'commands', 'i18n', 'schemas', 'decisionLog', 'config', 'startup', 'compose']
export const LAYERS = {
  domain: [],
  storage: ['domain'],
  security: ['domain'],
  engine: ['domain', 'storage'],
  replica: ['domain', 'storage', 'engine'],
  commands: ['domain', 'storage', 'security', 'engine', 'replica'],
  modelCheck: ['domain', 'storage', 'engine'],
  i18n: ['domain'],
  schemas: ['domain', 'engine', 'i18n'],
  decisionLog: ['domain', 'storage', 'engine'],
  http: [...FRONT_SHARED, 'modelGate', 'startNotice', 'grpc'],
  cli: [...FRONT_SHARED, 'modelCheck'],
  config: ['domain'],
  startup: ['domain', 'config'],
  compose: ['domain', 'storage', 'security', 'engine', 'replica', 'commands', 'decisionLog', 'config', 'modelGate'],
  modelGate: ['domain', 'storage', 'engine', 'modelCheck', 'config', 'compose'],
  startNotice: ['domain', 'storage', 'compose'],
  // gRPC is a second front end beside http: the runner (http/server.ts) starts and stops it.
  grpc: [...FRONT_SHARED, 'modelGate', 'startNotice'],
}

/** no-restricted-imports for the files of one layer: every part of src/ it may not import. */
function layerRule(layer) {
  const isRoot = ROOT_FILES.includes(layer)
  const forbidden = [...FOLDERS, ...ROOT_FILES].filter((name) => name !== layer && !LAYERS[layer].includes(name))
  // A file of a folder reaches another part of src/ by going up (`../engine/x.js`,
  // `../../config.js`); a root file by `./`.
  const up = isRoot ? String.raw`\./` : String.raw`(\.\./)+`
  return {
    files: [isRoot ? `src/${layer}.ts` : `src/${layer}/**/*.ts`],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: `^${up}(${forbidden.join('|')})(/|\\.js$)`,
              message: `src/${layer} may import only from ${LAYERS[layer].join(', ') || 'nothing else in src/'} (docs/architecture.md, "Layers").`,
            },
          ],
        },
      ],
    },
  }
}

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'data/**', '.tap/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    // The console runs in the browser as written: its globals are the browser's.
    files: ['console/**/*.js'],
    languageOptions: {
      globals: Object.fromEntries(
        ['document', 'location', 'navigator', 'sessionStorage', 'FormData', 'URL', 'fetch', 'addEventListener', 'removeEventListener'].map((name) => [name, 'readonly']),
      ),
    },
  },
  {
    files: ['**/*.ts'],
    rules: {
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', ignoreRestSiblings: true }],
    },
  },
  ...Object.keys(LAYERS).map(layerRule),
)
