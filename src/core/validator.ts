import { Ajv, type ErrorObject, type Options, type ValidateFunction } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import standaloneModule from 'ajv/dist/standalone/index.js';
import { linearRegExp } from './linear-regexp.js';
import { checkedLinearRegExp } from './schema-compiler/load.js';
import { LINEAR_UNIQUE_ITEMS_CODE } from './schema-compiler/unique-items.js';
import type { ObjectSchema, ToolInput } from './types.js';
import { isRecord } from './json.js';

// ajv-formats and ajv/dist/standalone ship CommonJS with a default export that NodeNext sees as the module object.
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;
const standaloneCode = ((standaloneModule as unknown as { default?: unknown }).default ?? standaloneModule) as (ajv: Ajv, validate: ValidateFunction) => string;

/** Most violations one error lists; the rest are counted, not listed. */
export const MAX_LISTED_VIOLATIONS = 50;
/**
 * Largest input, in JSON values, whose violations are all collected. Collecting costs an Ajv error
 * object per violation (about 170 bytes) and a 1 MiB body can hold half a million of them; past
 * this, only the first violation is reported, so the work stays bounded whatever the body limit.
 */
export const MAX_VALUES_FULLY_CHECKED = 10_000;
/** Longest path or message of one violation; a property name can be as long as the body. */
export const MAX_VIOLATION_TEXT_CHARS = 200;

const AJV_OPTIONS = { coerceTypes: false, removeAdditional: false, useDefaults: false, strict: false } as const;

/**
 * Tool input is validated as sent: no type coercion, no removal of unknown properties, no
 * defaults filled in. Non-strict so hand-written schemas may carry annotations (`examples`,
 * `$comment`, vendor keywords) without failing to compile. This instance collects every error;
 * `compileInputSchema` pairs it with one that stops at the first, for untrusted input.
 *
 * `untrusted` is for schemas toolport did not write (a source's, such as an upstream MCP
 * server's): none of Ajv's costs that grow faster than the schema or the value (see
 * `UNTRUSTED_OPTIONS` and `uniqueItems` below), and nothing written to the console. Each such
 * instance keeps every schema it compiled until it is collected itself: give each set of schemas
 * one of its own.
 *
 * `source` keeps each validator's code, for `standaloneCodes`: a source's schemas are compiled so
 * in a worker thread (see schema-compiler.ts), and loaded on the event loop. Such an instance
 * checks each pattern on RE2 and keeps none compiled (see `checkedLinearRegExp`).
 */
export function createAjv(options: { untrusted?: boolean; source?: boolean } = {}): Ajv {
  const kind: Kind = { untrusted: options.untrusted === true, source: options.source === true };
  const ajv = makeAjv(Ajv, true, kind);
  if (kind.untrusted || kind.source) kinds.set(ajv, kind);
  else standardInstances.add(ajv);
  return ajv;
}

/** What an instance made by `createAjv` was made for; its twins are made the same. */
interface Kind {
  untrusted: boolean;
  source: boolean;
}
const STANDARD: Kind = { untrusted: false, source: false };

/**
 * For schemas toolport did not write. `pattern` and `patternProperties` run on RE2 (see
 * linear-regexp.ts). A `$ref` compiles to a call, not a copy: inlined, a 5 KB schema whose
 * `$defs` entry is referenced 100 times took 1.8 s and 124 MiB to compile. Ajv's optimisation
 * pass is quadratic in the nesting of the code it makes, which grows with the properties: off,
 * a 1,000-property schema compiles in a third of the time. Ajv's logger would write a schema's
 * whole generated code (megabytes) to stderr when it fails to compile.
 */
const UNTRUSTED_OPTIONS = { code: { regExp: linearRegExp, optimize: false }, inlineRefs: false, logger: false } as const;

/** An instance of `Class` (draft-07's Ajv or Ajv2020) with the options of its kind and the formats. */
function makeAjv(Class: typeof Ajv | typeof Ajv2020, allErrors: boolean, kind: Kind): Ajv {
  const options: Options = { ...AJV_OPTIONS, ...(kind.untrusted ? UNTRUSTED_OPTIONS : undefined), allErrors };
  if (kind.source) options.code = { ...options.code, source: true, ...(kind.untrusted ? { regExp: checkedLinearRegExp } : undefined) };
  const ajv = addFormats(new Class(options) as Ajv);
  if (kind.untrusted) ajv.removeKeyword('uniqueItems').addKeyword(LINEAR_UNIQUE_ITEMS_CODE);
  return ajv;
}

// Instances made by createAjv without options: a schema that stands alone compiles the same in any of them.
const standardInstances = new WeakSet<Ajv>();
// Instances made by createAjv with options, whose twins are made the same.
const kinds = new WeakMap<Ajv, Kind>();
const kindOf = (ajv: Ajv): Kind => kinds.get(ajv) ?? STANDARD;

/**
 * An Ajv that compiles as the first-error instances do and keeps the code, for Ajv's standalone
 * code (`npm run validators` writes the built-in tools' validators with it).
 */
export function createStandaloneAjv(): Ajv {
  return addFormats(new Ajv({ ...AJV_OPTIONS, allErrors: false, code: { source: true, esm: true } }));
}

// Ajv's own advice is not to run allErrors on untrusted input: the first-error twin of each
// instance does the check. One twin per instance, so $ids stay apart as they do in the instances.
const firstErrorTwins = new WeakMap<Ajv, Ajv>();

function firstErrorTwin(ajv: Ajv): Ajv {
  let twin = firstErrorTwins.get(ajv);
  if (twin === undefined) {
    twin = makeAjv(Ajv, false, kindOf(ajv));
    firstErrorTwins.set(ajv, twin);
  }
  return twin;
}

/** One violation of a tool's input schema, addressed by JSON path (`$.path.to.field`). */
export interface InputViolation {
  path: string;
  message: string;
}

/** What is wrong with an input, in bounded size: at most `MAX_LISTED_VIOLATIONS` listed. */
export interface ViolationReport {
  violations: InputViolation[];
  /** Violations found but not listed. */
  omitted: number;
  /** False when checking stopped at the first violation because the input is too large. */
  complete: boolean;
}

/**
 * A compiled input schema. Calling it checks an input and stops at the first violation, so a
 * valid input costs one pass and an invalid one little more; `explain` says what is wrong with an
 * input that failed, at a cost bounded by `MAX_VALUES_FULLY_CHECKED`.
 */
export interface InputValidator {
  (input: unknown): input is ToolInput;
  explain(input: unknown): ViolationReport;
  /**
   * The input with every `null` given for an optional property that does not accept null left
   * out: models habitually send null for "not given", and OpenAI's strict mode makes optional
   * properties nullable. The same object when there is none; never changes the input.
   */
  dropNulls(input: ToolInput): ToolInput;
}

// A schema that declares JSON Schema 2020-12 (MCP's default dialect), or uses keywords only
// 2019-09 and 2020-12 have (which draft-07 would silently ignore), is compiled by Ajv's 2020
// class; every other one by the draft-07 class, which takes the schemas tools were written for
// (tuple `items`, `definitions`). One pair of 2020 instances per draft-07 instance.
const dialectTwins = new WeakMap<Ajv, { all: Ajv; first: Ajv }>();
const KEYWORDS_2020 = new Set([
  'prefixItems',
  'unevaluatedProperties',
  'unevaluatedItems',
  'dependentRequired',
  'dependentSchemas',
  '$dynamicRef',
  '$dynamicAnchor',
  '$recursiveRef',
  '$anchor',
  'minContains',
  'maxContains',
]);

function is2020(schema: ObjectSchema): boolean {
  if (typeof schema.$schema === 'string') return /^https?:\/\/json-schema\.org\/draft\/2020-12\/schema#?$/.test(schema.$schema);
  const stack: unknown[] = [schema];
  while (stack.length > 0) {
    const node = stack.pop();
    if (typeof node !== 'object' || node === null) continue;
    if (Array.isArray(node)) stack.push(...node);
    else {
      for (const [keyword, value] of Object.entries(node)) {
        if (KEYWORDS_2020.has(keyword)) return true;
        if (keyword !== 'enum' && keyword !== 'const' && keyword !== 'default' && keyword !== 'examples') stack.push(value);
      }
    }
  }
  return false;
}

function ajvFor(schema: ObjectSchema, ajv: Ajv): { all: Ajv; first: Ajv } {
  if (!is2020(schema)) return { all: ajv, first: firstErrorTwin(ajv) };
  let twins = dialectTwins.get(ajv);
  if (twins === undefined) {
    twins = {
      all: makeAjv(Ajv2020, true, kindOf(ajv)),
      first: makeAjv(Ajv2020, false, kindOf(ajv)),
    };
    dialectTwins.set(ajv, twins);
  }
  return twins;
}

/** How `compileInputSchema` and `compileOutputSchema` compile. */
export interface CompileOptions {
  /**
   * Check the schema now, without compiling it (its dialect's meta-schema, its regular
   * expressions, its local `$ref`s: what compiling would refuse), and compile it on first use.
   * Compiling is most of what registering a tool costs, in time and memory, and most tools of a
   * large set are never called. A schema only compiling can vouch for (an `$id`, an anchor, a
   * reference to another document) compiles now all the same.
   */
  lazy?: boolean;
}

/**
 * Compiles a tool's input schema; throws Ajv's own error when the schema is invalid (with `lazy`,
 * the schema is checked now and compiled on first use). Input nested too deeply for the checks (a
 * recursive schema and a deeper input overflow the stack) is invalid, not an internal error.
 */
export function compileInputSchema(schema: ObjectSchema, ajv: Ajv = createAjv(), options: CompileOptions = {}): InputValidator {
  return inputValidatorOf(schema, compiled(schema, ajv, options.lazy === true));
}

/** The input validator of `schema` whose compiled forms are `forms` (made in another thread, say: see `standaloneCodes`). */
export function inputValidatorOf(schema: ObjectSchema, { firstOnly, collectAll }: CompiledForms): InputValidator {
  const check = (input: unknown): input is ToolInput => {
    try {
      return firstOnly()(input);
    } catch (err) {
      if (err instanceof RangeError) return false;
      throw err;
    }
  };
  // What null may be dropped where: worked out with the first input, as the checks are.
  let plan: NullPlan | undefined | null = null;
  return Object.assign(check, {
    explain: (input: unknown) => {
      try {
        return explain(input, firstOnly(), collectAll());
      } catch (err) {
        if (!(err instanceof RangeError)) throw err;
        return { violations: [{ path: '$', message: 'is nested too deeply to check' }], omitted: 0, complete: true };
      }
    },
    dropNulls: (input: ToolInput) => {
      if (plan === null) plan = nullPlan(schema);
      if (plan === undefined) return input;
      try {
        return applyNullPlan(input, plan) as ToolInput;
      } catch (err) {
        // Too deep to walk: left as sent, for the check to refuse.
        if (err instanceof RangeError) return input;
        throw err;
      }
    },
  });
}

/**
 * A compiled output schema: calling it checks a tool's `structuredContent` (first violation only);
 * `explain` lists the violations of one that failed, bounded as input violations are.
 */
export interface OutputValidator {
  (value: unknown): boolean;
  explain(value: unknown): ViolationReport;
}

/**
 * Compiles a tool's output schema, with the rules of input schemas (dialect, formats, no
 * coercion); throws Ajv's own error when the schema is invalid (with `lazy`, as
 * `compileInputSchema`). A value nested too deeply to check fails, with that said.
 */
export function compileOutputSchema(schema: ObjectSchema, ajv: Ajv = createAjv(), options: CompileOptions = {}): OutputValidator {
  return outputValidatorOf(compiled(schema, ajv, options.lazy === true));
}

/** The output validator whose compiled forms are `forms`, as `inputValidatorOf`. */
export function outputValidatorOf({ firstOnly, collectAll }: CompiledForms): OutputValidator {
  const check = (value: unknown): boolean => {
    try {
      return firstOnly()(value);
    } catch (err) {
      if (err instanceof RangeError) return false;
      throw err;
    }
  };
  return Object.assign(check, {
    explain: (value: unknown): ViolationReport => {
      try {
        return explain(value, firstOnly(), collectAll());
      } catch (err) {
        if (!(err instanceof RangeError)) throw err;
        return { violations: [{ path: '$', message: 'is nested too deeply to check' }], omitted: 0, complete: true };
      }
    },
  });
}

/**
 * The two compiled forms of a schema, each made when first asked for: the one that stops at the
 * first violation (the check), and the one that collects them all (`explain`).
 */
export interface CompiledForms {
  firstOnly: () => ValidateFunction<ToolInput>;
  collectAll: () => ValidateFunction<ToolInput>;
}

/**
 * The two forms of `schema`, compiled now by `ajv` (made by `createAjv` with `source`) and written
 * as Ajv's standalone code (CommonJS, see schema-compiler/load.ts); throws Ajv's own error when
 * the schema is invalid, as `compileInputSchema` does. Both compile now, because the code is
 * loaded where Ajv is not: in-process, the collecting form compiles on the first failed input.
 */
export function standaloneCodes(schema: ObjectSchema, ajv: Ajv): { firstOnly: string; collectAll: string } {
  if (!kindOf(ajv).source) throw new Error('standaloneCodes needs an Ajv made by createAjv({ source: true })');
  const dialect = ajvFor(schema, ajv);
  const firstOnly = dialect.first.compile(schema);
  const collectAll = dialect.all.compile(schema);
  return { firstOnly: standaloneCode(dialect.first, firstOnly), collectAll: standaloneCode(dialect.all, collectAll) };
}

// Validators compiled ahead of time, by their schema's JSON text: handed in by whoever wrote the
// schemas (the built-in tools), so the core knows no tool.
const precompiledValidators = new Map<string, ValidateFunction>();

/**
 * Hands over validators compiled ahead of time (Ajv's standalone code, made with
 * `createStandaloneAjv`: first violation only), each under its schema's JSON text. A schema with
 * that very text, compiled by an instance `createAjv` made without options, takes its validator
 * instead of compiling: the built-in tools hand theirs (`npm run validators`), so that start-up
 * compiles none of them. A later validator for the same text replaces the earlier.
 */
export function usePrecompiledValidators(validators: ReadonlyMap<string, (data: unknown) => boolean>): void {
  // Standalone code is a ValidateFunction but for the compiling instance's fields, which checking never reads.
  for (const [schemaText, validate] of validators) precompiledValidators.set(schemaText, validate as ValidateFunction);
}

// By schema object, for schemas that stand alone: the same tool registered in several registries
// (TOOLPORT_TOOLS, the keys' workspaces) is compiled once. Compiling is most of what registering costs.
const compiledSchemas = new WeakMap<ObjectSchema, CompiledForms>();

/**
 * Compiles `schema` for checking (which also checks the schema itself, so a bad one fails at
 * registration) and for explaining later, on the first input that fails. `lazy`: checked now by
 * `checkWithoutCompiling` where it can vouch for the schema, compiled on first use.
 */
function compiled(schema: ObjectSchema, ajv: Ajv, lazy: boolean): CompiledForms {
  const alone = standsAlone(schema);
  const shareable = standardInstances.has(ajv) && alone;
  const known = shareable ? compiledSchemas.get(schema) : undefined;
  if (known !== undefined) return known;
  const dialect = ajvFor(schema, ajv);
  // Compiled ahead of time (see `usePrecompiledValidators`), from a schema with this very text:
  // Ajv compiled it then, so it needs no check now (the meta-schema's compiling was a tenth of a
  // cold start).
  const precompiled =
    standardInstances.has(ajv) && dialect.all === ajv && precompiledValidators.size > 0
      ? (precompiledValidators.get(JSON.stringify(schema)) as ValidateFunction<ToolInput> | undefined)
      : undefined;
  let firstOnly: ValidateFunction<ToolInput> | undefined = precompiled;
  const compileFirst = (): ValidateFunction<ToolInput> => dialect.first.compile<ToolInput>(schema);
  if (firstOnly === undefined && !(lazy && alone && checkWithoutCompiling(schema, dialect.first))) firstOnly = compileFirst();
  let collectAll: ValidateFunction<ToolInput> | undefined;
  const result = { firstOnly: () => (firstOnly ??= compileFirst()), collectAll: () => (collectAll ??= dialect.all.compile<ToolInput>(schema)) };
  if (shareable) compiledSchemas.set(schema, result);
  return result;
}

/**
 * Finds, without compiling, what compiling a schema that stands alone would refuse, and throws
 * it with Ajv's own words: a schema its dialect's meta-schema refuses, a `pattern` or
 * `patternProperties` key that is not a regular expression (Ajv's meta-schema check leaves those
 * to compiling), a local `$ref` to nowhere. False when the schema holds a reference only compiling
 * can follow (an anchor's name), so it is compiled now.
 */
function checkWithoutCompiling(schema: ObjectSchema, ajv: Ajv): boolean {
  if (!ajv.validateSchema(schema)) throw new Error(`schema is invalid: ${ajv.errorsText(ajv.errors)}`);
  for (const [keyword, value] of schemaKeywords(schema)) {
    // Ajv's own flags: its regular expressions are Unicode ones.
    if (keyword === 'pattern' && typeof value === 'string') new RegExp(value, 'u');
    else if (keyword === 'patternProperties' && isRecord(value)) for (const key of Object.keys(value)) new RegExp(key, 'u');
    else if (keyword === '$ref' && typeof value === 'string' && value !== '#') {
      if (!value.startsWith('#/')) return false;
      if (!pointsSomewhere(schema, value)) throw new Error(`can't resolve reference ${value} from id #`);
    }
  }
  return true;
}

// Keywords whose values are data, not schemas: a walk over a schema's keywords does not enter them.
const DATA_KEYWORDS = new Set(['enum', 'const', 'default', 'examples']);

/** Every keyword of a schema and of the schemas inside it, with its value. */
function* schemaKeywords(schema: unknown): Generator<[string, unknown]> {
  const stack: unknown[] = [schema];
  while (stack.length > 0) {
    const node = stack.pop();
    if (typeof node !== 'object' || node === null) continue;
    if (Array.isArray(node)) {
      stack.push(...node);
      continue;
    }
    for (const [keyword, value] of Object.entries(node)) {
      yield [keyword, value];
      if (!DATA_KEYWORDS.has(keyword)) stack.push(value);
    }
  }
}

/** Whether a local JSON Pointer reference (`#/...`) names a value inside `root`. */
function pointsSomewhere(root: unknown, ref: string): boolean {
  let target: unknown = root;
  for (const token of ref.slice(2).split('/')) {
    const key = safeDecode(token).replace(/~1/g, '/').replace(/~0/g, '~');
    if (!(isRecord(target) || Array.isArray(target)) || !Object.hasOwn(target, key)) return false;
    target = (target as Record<string, unknown>)[key];
  }
  return true;
}

/**
 * True when a schema means the same in any Ajv instance: no `$id` (which registers it in the
 * instance, where another schema could refer to it) and no reference outside itself.
 */
function standsAlone(schema: ObjectSchema): boolean {
  for (const [keyword, value] of schemaKeywords(schema)) {
    if (keyword === '$id' || keyword === '$anchor' || keyword === '$dynamicAnchor' || keyword === '$recursiveAnchor') return false;
    if ((keyword === '$ref' || keyword === '$dynamicRef' || keyword === '$recursiveRef') && !(typeof value === 'string' && value.startsWith('#'))) return false;
  }
  return true;
}

/**
 * Where in an input a null means "not given": optional properties that do not accept null, at
 * any depth of `properties`, `items`, local `$ref`s and the members of `anyOf`, `oneOf` and
 * `allOf` (the places strict-mode schemas make optional properties nullable).
 */
interface NullPlan {
  drop: Set<string>;
  properties: Map<string, NullPlan>;
  items?: NullPlan | undefined;
}

function nullPlan(root: unknown): NullPlan | undefined {
  // One plan per schema node, made before its parts, so a recursive schema has a recursive plan.
  const plans = new Map<object, NullPlan>();
  const build = (node: unknown): NullPlan | undefined => {
    const schema = resolveLocal(root, node);
    if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) return undefined;
    const known = plans.get(schema);
    if (known !== undefined) return known;
    const plan: NullPlan = { drop: new Set(), properties: new Map() };
    plans.set(schema, plan);
    const s = schema as { properties?: unknown; required?: unknown; items?: unknown; anyOf?: unknown; oneOf?: unknown; allOf?: unknown };
    const nullable = new Set<string>();
    const add = (part: NullPlan | undefined): void => {
      if (part === undefined || part === plan) return;
      for (const key of part.drop) plan.drop.add(key);
      for (const [key, nested] of part.properties) if (!plan.properties.has(key)) plan.properties.set(key, nested);
      plan.items ??= part.items;
    };
    if (isRecord(s.properties)) {
      const required = new Set(Array.isArray(s.required) ? s.required : []);
      for (const [name, sub] of Object.entries(s.properties)) {
        if (acceptsNull(resolveLocal(root, sub), root)) nullable.add(name);
        else if (!required.has(name)) plan.drop.add(name);
        const nested = build(sub);
        if (nested !== undefined) plan.properties.set(name, nested);
      }
    }
    if (!Array.isArray(s.items)) plan.items = build(s.items);
    for (const members of [s.anyOf, s.oneOf, s.allOf]) {
      if (!Array.isArray(members)) continue;
      for (const member of members) {
        add(build(member));
        const properties = (resolveLocal(root, member) as { properties?: unknown } | undefined)?.properties;
        if (isRecord(properties)) for (const [name, sub] of Object.entries(properties)) if (acceptsNull(resolveLocal(root, sub), root)) nullable.add(name);
      }
    }
    // A key some branch takes null for keeps its null.
    for (const key of nullable) plan.drop.delete(key);
    return plan;
  };
  const plan = build(root);
  return plan === undefined || isEmpty(plan, new Set()) ? undefined : plan;
}

function isEmpty(plan: NullPlan, seen: Set<NullPlan>): boolean {
  if (seen.has(plan)) return true;
  seen.add(plan);
  if (plan.drop.size > 0) return false;
  for (const nested of plan.properties.values()) if (!isEmpty(nested, seen)) return false;
  return plan.items === undefined || isEmpty(plan.items, seen);
}

/** `node`, or what its local `$ref` (`#`, `#/$defs/...`, `#/definitions/...`) points to, following up to 16 hops. */
function resolveLocal(root: unknown, node: unknown): unknown {
  for (let hops = 0; hops < 16; hops++) {
    const ref = isRecord(node) ? node['$ref'] : undefined;
    if (typeof ref !== 'string' || !ref.startsWith('#')) return node;
    let target: unknown = root;
    for (const token of ref.slice(1).split('/').slice(1)) {
      const key = safeDecode(token).replace(/~1/g, '/').replace(/~0/g, '~');
      target = isRecord(target) || Array.isArray(target) ? (target as Record<string, unknown>)[key] : undefined;
    }
    if (target === undefined) return node;
    node = target;
  }
  return node;
}

function safeDecode(token: string): string {
  try {
    return decodeURIComponent(token);
  } catch {
    return token;
  }
}

/** Whether a schema may accept null; unsure (an outside $ref, no type at all) counts as yes, so the null is left for validation. */
function acceptsNull(schema: unknown, root?: unknown): boolean {
  if (typeof schema !== 'object' || schema === null) return schema !== false;
  const s = schema as { type?: unknown; enum?: unknown; const?: unknown; anyOf?: unknown; oneOf?: unknown; $ref?: unknown };
  if ('const' in s) return s.const === null;
  if (Array.isArray(s.enum)) return s.enum.includes(null);
  for (const members of [s.anyOf, s.oneOf]) if (Array.isArray(members)) return members.some((m) => acceptsNull(resolveLocal(root, m), undefined));
  if (typeof s.type === 'string') return s.type === 'null';
  if (Array.isArray(s.type)) return s.type.includes('null');
  return true;
}

function applyNullPlan(value: unknown, plan: NullPlan): unknown {
  if (Array.isArray(value)) {
    if (plan.items === undefined) return value;
    let copy: unknown[] | undefined;
    for (const [i, item] of value.entries()) {
      const prepared = applyNullPlan(item, plan.items);
      if (prepared !== item) (copy ??= [...value])[i] = prepared;
    }
    return copy ?? value;
  }
  if (typeof value !== 'object' || value === null) return value;
  let copy: Record<string, unknown> | undefined;
  for (const key in value) {
    const item = (value as Record<string, unknown>)[key];
    if (item === null && plan.drop.has(key)) {
      copy ??= { ...value };
      delete copy[key];
      continue;
    }
    const nested = plan.properties.get(key);
    if (nested === undefined) continue;
    const prepared = applyNullPlan(item, nested);
    if (prepared !== item) (copy ??= { ...value })[key] = prepared;
  }
  return copy ?? value;
}

function explain(input: unknown, firstOnly: ValidateFunction, collectAll: ValidateFunction): ViolationReport {
  const complete = !hasMoreValuesThan(input, MAX_VALUES_FULLY_CHECKED);
  const validate = complete ? collectAll : firstOnly;
  if (validate(input)) return { violations: [], omitted: 0, complete: true };
  // Even the first-error pass may report a few errors: the failed branches of an anyOf, say.
  const errors = validate.errors ?? [];
  return {
    violations: describeViolations(errors.slice(0, MAX_LISTED_VIOLATIONS)),
    omitted: Math.max(0, errors.length - MAX_LISTED_VIOLATIONS),
    complete,
  };
}

/**
 * True when `input` holds more than `limit` JSON values (the input itself, and every property
 * value and array item at any depth). Stops as soon as it has counted past `limit`, with a stack
 * of its own, so neither a huge nor a deeply nested input costs more than that.
 */
export function hasMoreValuesThan(input: unknown, limit: number): boolean {
  let count = 1;
  const stack: unknown[] = [input];
  while (stack.length > 0) {
    const value = stack.pop();
    if (typeof value !== 'object' || value === null) continue;
    if (Array.isArray(value)) {
      count += value.length;
      if (count > limit) return true;
      for (const item of value) stack.push(item);
    } else {
      for (const key in value) {
        if (++count > limit) return true;
        stack.push((value as Record<string, unknown>)[key]);
      }
    }
  }
  return count > limit;
}

/**
 * The lines of an error message listing a report's violations, and what was left out; `of` says
 * what was checked: a call's input (the default) or a tool's structured content.
 */
export function violationLines(report: ViolationReport, of: 'input' | 'output' = 'input'): string {
  const lines = report.violations.map((v) => `- ${v.path}: ${v.message}`);
  if (report.omitted > 0) lines.push(`- ... and ${report.omitted} more violation${report.omitted === 1 ? '' : 's'}`);
  if (!report.complete) {
    lines.push(
      of === 'input'
        ? `(The input holds more than ${MAX_VALUES_FULLY_CHECKED} values, so checking stopped at the first violation; fix it and send the input again to see any others.)`
        : `(The structured content holds more than ${MAX_VALUES_FULLY_CHECKED} values, so checking stopped at the first violation.)`,
    );
  }
  return lines.join('\n');
}

/**
 * Turns Ajv's errors into violations a model can act on: a JSON path and a plain message, each
 * cut to `MAX_VIOLATION_TEXT_CHARS`.
 */
export function describeViolations(errors: readonly ErrorObject[]): InputViolation[] {
  return errors.map((e) => {
    let path = jsonPath(e.instancePath);
    let message = e.message ?? 'is invalid';
    if (e.keyword === 'additionalProperties') {
      const extra = String((e.params as { additionalProperty: string }).additionalProperty);
      path = appendProperty(path, extra);
      message = 'is not an allowed property';
    } else if (e.keyword === 'required') {
      const missing = String((e.params as { missingProperty: string }).missingProperty);
      path = appendProperty(path, missing);
      message = 'is required';
    } else if (e.keyword === 'enum') {
      const allowed = (e.params as { allowedValues: unknown[] }).allowedValues;
      message = `must be one of ${allowed.map((v) => JSON.stringify(v)).join(', ')}`;
    }
    return { path: shorten(path), message: shorten(message) };
  });
}

/** `text` cut to `MAX_VIOLATION_TEXT_CHARS`, ending in "...", never inside a surrogate pair. */
function shorten(text: string): string {
  if (text.length <= MAX_VIOLATION_TEXT_CHARS) return text;
  let cut = MAX_VIOLATION_TEXT_CHARS - 3;
  const last = text.charCodeAt(cut - 1);
  if (last >= 0xd800 && last <= 0xdbff) cut -= 1;
  return `${text.slice(0, cut)}...`;
}

function jsonPath(pointer: string): string {
  if (pointer === '') return '$';
  return pointer
    .split('/')
    .slice(1)
    .map((token) => token.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce((path, key) => appendKey(path, key), '$');
}

/** A JSON Pointer token may be an array index or a property; digits are taken as an index. */
function appendKey(path: string, key: string): string {
  if (/^\d+$/.test(key)) return `${path}[${key}]`;
  return appendProperty(path, key);
}

/** A key known to be an object property, even when it is made of digits. */
function appendProperty(path: string, key: string): string {
  if (/^[A-Za-z_$][\w$]*$/.test(key)) return `${path}.${key}`;
  return `${path}[${JSON.stringify(key)}]`;
}
