import { createAjv, standaloneCodes } from '../validator.js';
import type { ObjectSchema } from '../types.js';
import { loadValidator, type StandaloneValidator } from './load.js';

/** One tool's schemas to compile: `output` undefined when it declares none (or one the registry refused unseen). */
export interface ToolSchemas {
  input: ObjectSchema;
  output: ObjectSchema | undefined;
}

/** A schema's two forms (see `CompiledForms` in validator.ts), or Ajv's words for why it does not compile. */
export type SchemaCompilation = { forms: { firstOnly: StandaloneValidator; collectAll: StandaloneValidator } } | { error: string };

/** What became of one tool's schemas: the output schema is compiled only after the input schema did. */
export interface ToolCompilation {
  input: SchemaCompilation;
  output?: SchemaCompilation;
}

/**
 * Compiles one listing's schemas in order with one Ajv of its own, as `ToolRegistry.replaceSource`
 * compiles them on the event loop (so an `$id` meets only those listed before it in the same
 * listing), and writes each as standalone code with V8's cache of it. Runs in the worker thread
 * (worker.ts), or on the event loop where no thread can start.
 */
export function compileListing(listing: readonly ToolSchemas[]): ToolCompilation[] {
  const ajv = createAjv({ untrusted: true, source: true });
  return listing.map(({ input, output }) => {
    const compiledInput = compileSchema(input, ajv);
    if ('error' in compiledInput || output === undefined) return { input: compiledInput };
    return { input: compiledInput, output: compileSchema(output, ajv) };
  });
}

function compileSchema(schema: ObjectSchema, ajv: ReturnType<typeof createAjv>): SchemaCompilation {
  try {
    const codes = standaloneCodes(schema, ajv);
    return { forms: { firstOnly: withCache(codes.firstOnly), collectAll: withCache(codes.collectAll) } };
  } catch (err) {
    return { error: err instanceof Error ? err.message : String(err) };
  }
}

/**
 * The code, and V8's cache of it once its root function has run (V8 compiles a function on its
 * first call; the cache holds what was compiled): loaded with the cache, the event loop neither
 * parses nor compiles it. Loading it here also proves that it loads.
 */
function withCache(code: string): StandaloneValidator {
  const { validate, script } = loadValidator({ code, cache: undefined });
  // Any value does: this runs the type check of the root and returns. An $async schema's answer is a promise.
  const answer: unknown = validate(undefined);
  if (answer instanceof Promise) answer.catch(() => undefined);
  return { code, cache: script.createCachedData() };
}

/** The buffers of `compilations` that can be moved to another thread rather than copied. */
export function transferablesOf(compilations: readonly ToolCompilation[]): ArrayBuffer[] {
  const buffers: ArrayBuffer[] = [];
  const add = (compilation: SchemaCompilation | undefined): void => {
    if (compilation === undefined || 'error' in compilation) return;
    for (const { cache } of [compilation.forms.firstOnly, compilation.forms.collectAll]) {
      // A cache that shares its buffer with others (Node's pool of small buffers) is copied.
      if (cache !== undefined && cache.byteOffset === 0 && cache.byteLength === cache.buffer.byteLength && cache.buffer instanceof ArrayBuffer) {
        buffers.push(cache.buffer);
      }
    }
  };
  for (const { input, output } of compilations) {
    add(input);
    add(output);
  }
  return buffers;
}
