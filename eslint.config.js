import js from '@eslint/js'
import tseslint from 'typescript-eslint'

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
)
