import { Script } from 'node:vm';
import type { ValidateFunction } from 'ajv';
import equalModule from 'ajv/dist/runtime/equal.js';
import ucs2lengthModule from 'ajv/dist/runtime/ucs2length.js';
import validationErrorModule from 'ajv/dist/runtime/validation_error.js';
import { fullFormats } from 'ajv-formats/dist/formats.js';
import { linearRegExp } from '../linear-regexp.js';
import type { ToolInput } from '../types.js';
import type { CompiledForms } from '../validator.js';
import { firstDuplicate } from './unique-items.js';

/**
 * A validator as Ajv's standalone code (see `standaloneCodes` in validator.ts), with V8's cache of
 * its compiled code when the thread that wrote it made one: loading with the cache skips parsing
 * and compiling, which for a 64 KiB schema's 840 KiB of code is most of the cost.
 */
export interface StandaloneValidator {
  code: string;
  cache: Uint8Array | undefined;
}

// Ajv's CommonJS runtime modules: under Node's ESM rules a default import is module.exports, under a
// bundler's it may be `default` itself. Standalone code reads `.default` of each.
const defaultOf = (module: unknown): unknown => (module as { default?: unknown }).default ?? module;

/** What standalone code may `require`, by the exact names Ajv writes; nothing else loads. */
const RUNTIME = new Map<string, unknown>([
  ['ajv/dist/runtime/equal', { default: defaultOf(equalModule) }],
  ['ajv/dist/runtime/ucs2length', { default: defaultOf(ucs2lengthModule) }],
  ['ajv/dist/runtime/validation_error', { default: defaultOf(validationErrorModule) }],
  ['ajv-formats/dist/formats', { fullFormats }],
]);

function runtimeRequire(name: string): unknown {
  const module = RUNTIME.get(name);
  if (module === undefined) throw new Error(`the validator's code needs ${JSON.stringify(name)}, which toolport does not give it`);
  return module;
}

/**
 * RE2 as `linearRegExp` is, but each pattern compiles on its first use: a 64 KiB schema can hold
 * a thousand patterns (about 70 ms to compile them all), and most are never used. The thread that
 * wrote the code checked every pattern (`checkedLinearRegExp`), so one RE2 cannot run was refused there.
 */
function lazyLinearRegExp(pattern: string): { test(input: string): boolean; toString(): string } {
  let compiled: ReturnType<typeof linearRegExp> | undefined;
  return { test: (input) => (compiled ??= linearRegExp(pattern)).test(input), toString: () => `re2:${pattern}` };
}

/**
 * Ajv's regular-expression engine where validators are only written as code (see `createAjv`'s
 * `source`): each pattern is compiled once, so one RE2 cannot run fails there as it would on the
 * event loop, and let go. Kept, the thousand compiled patterns of a 64 KiB schema held about
 * 16 MiB per form until the listing was done.
 */
export const checkedLinearRegExp = Object.assign(
  (pattern: string): { test(input: string): boolean; toString(): string } => {
    linearRegExp(pattern);
    return lazyLinearRegExp(pattern);
  },
  { code: linearRegExp.code },
);

// The names the code refers to: `linearRegExp` and `linearUniqueItems` are the `code` of what
// validator.ts gives Ajv (UNTRUSTED_OPTIONS, LINEAR_UNIQUE_ITEMS_CODE).
const PARAMETERS = ['require', 'module', linearRegExp.code, firstDuplicate.code];

/** Runs `validator`'s code in this thread; the script too, so the thread that wrote it can cache what it compiled. */
export function loadValidator(validator: StandaloneValidator): { validate: ValidateFunction<ToolInput>; script: Script } {
  const script = new Script(`(function (${PARAMETERS.join(', ')}) {${validator.code}\n})`, {
    filename: 'toolport-source-schema.js',
    ...(validator.cache === undefined ? {} : { cachedData: validator.cache }),
  });
  const module: { exports?: unknown } = {};
  (script.runInThisContext() as (...runtime: unknown[]) => void)(runtimeRequire, module, lazyLinearRegExp, firstDuplicate);
  if (typeof module.exports !== 'function') throw new Error("the validator's code exported no function");
  return { validate: module.exports as ValidateFunction<ToolInput>, script };
}

/**
 * `CompiledForms` over a schema's two standalone validators, each loaded on first use: a source
 * may list again before anyone calls a tool, and the form that collects every violation is needed
 * only for an input that failed. A loaded validator's cache is let go.
 */
export function lazyForms(forms: { firstOnly: StandaloneValidator; collectAll: StandaloneValidator }): CompiledForms {
  return { firstOnly: loadOnce(forms.firstOnly), collectAll: loadOnce(forms.collectAll) };
}

function loadOnce(validator: StandaloneValidator): () => ValidateFunction<ToolInput> {
  let unloaded: StandaloneValidator | undefined = validator;
  let loaded: ValidateFunction<ToolInput> | undefined;
  return () => {
    if (loaded === undefined) {
      loaded = loadValidator(unloaded!).validate;
      unloaded = undefined;
    }
    return loaded;
  };
}
