// ESLint flat config: typescript-eslint's recommended rules without type information (a type-aware
// run takes minutes on this repo; `npm run typecheck` covers types).
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', '.stack/', 'node_modules/', 'apps/web/dist/', 'benchmarks/results/'] },
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    languageOptions: { globals: globals.node },
    rules: {
      // A leading underscore marks a parameter kept for its position or a field dropped by a rest
      // pattern (`{ secret: _secret, ...shown }`): both deliberate.
      '@typescript-eslint/no-unused-vars': [
        'error',
        {
          argsIgnorePattern: '^_',
          varsIgnorePattern: '^_',
          caughtErrorsIgnorePattern: '^_',
          destructuredArrayIgnorePattern: '^_',
          ignoreRestSiblings: true,
        },
      ],
      // `cond ? add() : remove()` as a statement is house style in the dashboard.
      '@typescript-eslint/no-unused-expressions': ['error', { allowShortCircuit: true, allowTernary: true }],
      // `let server; server = create(() => server…)`: a callback that names the object it is passed to
      // cannot see a `const` declared on the same line.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
    },
  },
  {
    files: ['apps/web/src/**'],
    languageOptions: { globals: globals.browser },
  },
  {
    // Its functions passed to page.evaluate() run in the browser.
    files: ['scripts/screenshots.mjs'],
    languageOptions: { globals: { ...globals.node, ...globals.browser } },
  },
  {
    // Matches control characters on purpose, to refuse them in names and text.
    files: ['lib/validate.ts'],
    rules: { 'no-control-regex': 'off' },
  },
);
