import { ToolRegistrationError } from './errors.js';
import { isRecord } from './json.js';
import { formatTools, type APIFormat, type APIShapes, type ListOptions } from './formats.js';
import type { ToolScope } from '../core/principal.js';
import type { Permissions } from './permissions.js';
import { sharedSchemaCompiler, type ListingOutcome, type SchemaCompiler } from './schema-compiler/compiler.js';
import { outputRootRule, planListing, validatorsOf, type Slot } from './schema-compiler/listing.js';
import { compileInputSchema, compileOutputSchema, createAjv, type InputValidator, type OutputValidator } from './validator.js';
import type { ObjectSchema, ToolDef } from './types.js';

// The strictest rules that the Anthropic API, OpenAI and MCP all accept.
export const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;
const PROPERTY_NAME = /^[a-zA-Z0-9_.-]{1,64}$/;
const ROOT_COMBINATORS = ['oneOf', 'anyOf', 'allOf'] as const;
// The longest delay setTimeout honours; past it, it fires after 1 ms.
const MAX_TIMEOUT_MS = 2_147_483_647;
// Ajv instances whose compilations a source's tools may use at once (see `#reusable`).
const MAX_GENERATIONS = 2;

type Ajv = ReturnType<typeof createAjv>;

/** A tool that `replaceSource` left out, and why. */
export interface Refusal {
  name: string;
  reason: string;
}

interface Entry {
  tool: ToolDef;
  /** Where the tool came from: '' for tools registered one by one, else the name given to `replaceSource`. */
  source: string;
  validate: InputValidator;
  /** Present when the tool declares an output schema. */
  checkOutput: OutputValidator | undefined;
  /**
   * What holds the compiled schemas and all its other compilations: the Ajv that compiled them
   * (the registry's own, or one made for a `replaceSource`), or one per `replaceSourceAsync`.
   */
  generation: object;
}

// Registries count, so each has lanes of its own in a shared schema compiler.
let registries = 0;

/**
 * The set of tools a server offers. `register` checks each tool once, so everything downstream
 * (validation, publishing, execution) can trust it. Tools list in registration order: a stable
 * order keeps clients' prompt caches warm.
 */
export class ToolRegistry {
  readonly #entries = new Map<string, Entry>();
  // The lists of every tool, and of each scope: made on first use, dropped by the next register.
  #published: Published | undefined;
  // Keyed by the scope object itself, so a scope no one holds any more takes its lists with it.
  #scoped = new WeakMap<ToolScope, Published>();
  // Each registry compiles with its own Ajv, so tools in different registries may reuse an $id.
  readonly #ajv = createAjv();
  readonly #listeners = new Set<() => void>();
  readonly #compiler: SchemaCompiler | undefined;
  readonly #lanes = `registry ${++registries}`;

  /** `schemaCompiler`: where `replaceSourceAsync` compiles; the process's shared one by default (started on first use). */
  constructor(options: { schemaCompiler?: SchemaCompiler } = {}) {
    this.#compiler = options.schemaCompiler;
  }

  /** Adds a tool; throws `ToolRegistrationError` naming the tool and the rule it breaks. */
  register(tool: ToolDef): this {
    const entry = this.#check(tool);
    if (this.#entries.has(entry.tool.name)) throw new ToolRegistrationError(entry.tool.name, 'a tool with this name is already registered');
    this.#entries.set(entry.tool.name, entry);
    this.#changed();
    return this;
  }

  /**
   * Puts `tools` in place of the tools `source` gave before, in one step: a tool source whose set
   * changes at run time (an upstream MCP server). The source keeps its place in the order; a new
   * source goes last. A tool that breaks a rule, or whose name another source holds (a built-in is
   * never shadowed), is left out and returned with the reason; the others are served.
   *
   * A source's schemas are not the operator's code: they compile with an Ajv for untrusted
   * schemas (see `createAjv`), a new one for each call, so an `$id` never meets its own earlier
   * compilation or another source's, and what a replaced tool compiled goes with its Ajv. A tool
   * whose schemas are unchanged keeps its compiled validators: a re-list compiles only what changed.
   */
  replaceSource(source: string, tools: readonly ToolDef[]): Refusal[] {
    if (source === '') throw new Error('replaceSource needs a source name');
    const refused: Refusal[] = [];
    const fresh = new Map<string, Entry>();
    const reusable = this.#reusable(source, tools);
    let ajv: Ajv | undefined;
    const newAjv = (): Ajv => (ajv ??= createAjv({ untrusted: true }));
    for (const tool of tools) {
      try {
        const earlier = typeof tool?.name === 'string' ? reusable.get(tool.name) : undefined;
        this.#admit(this.#check(tool, source, earlier ?? newAjv), source, fresh);
      } catch (err) {
        if (!(err instanceof ToolRegistrationError)) throw err;
        refused.push({ name: nameOf(tool), reason: err.message });
      }
    }
    this.#install(source, fresh);
    return refused;
  }

  /**
   * `replaceSource`, with the schemas that need compiling compiled in a worker thread (see
   * `SchemaCompiler`), not on the event loop: the same checks, refusals and reasons, the same
   * reuse of unchanged tools' validators, the same change notification, made when the compile
   * ends. One listing of a source compiles at a time: a newer call while this one still waits for
   * its turn replaces it, and this one resolves 'superseded' (nothing of it applied). A listing
   * whose schemas take too long to compile has those tools refused, with a reason that says so.
   * Do not mix with `replaceSource` for the same source.
   */
  replaceSourceAsync(source: string, tools: readonly ToolDef[]): Promise<Refusal[] | 'superseded'> {
    if (source === '') return Promise.reject(new Error('replaceSource needs a source name'));
    let slots: Array<Slot<Entry>> = [];
    return (this.#compiler ?? sharedSchemaCompiler()).submit(`${this.#lanes}\0${source}`, {
      // Read when the listing's turn comes, after the source's listing before it is in place.
      prepare: () => {
        const plan = planListing(tools, (tool) => this.#checkRules(tool), this.#reusable(source, tools));
        slots = plan.slots;
        return plan.listing;
      },
      commit: (outcome) => this.#commitSlots(source, slots, outcome),
    });
  }

  /** Puts a listing's checked tools in place with what the compiler made of their schemas, as `replaceSource` would have. */
  #commitSlots(source: string, slots: ReadonlyArray<Slot<Entry>>, outcome: ListingOutcome): Refusal[] {
    const refused: Refusal[] = [];
    const fresh = new Map<string, Entry>();
    // What this listing compiled goes together, as what one Ajv compiled does (see `#reusable`).
    const generation = {};
    for (const slot of slots) {
      try {
        if ('refused' in slot) refused.push({ name: nameOf(slot.tool), reason: slot.refused });
        else if ('earlier' in slot) this.#admit({ ...slot.earlier, tool: slot.tool, source }, source, fresh);
        else this.#admit({ tool: slot.tool, source, ...validatorsOf(slot, outcome), generation }, source, fresh);
      } catch (err) {
        if (!(err instanceof ToolRegistrationError)) throw err;
        refused.push({ name: nameOf(slot.tool), reason: err.message });
      }
    }
    this.#install(source, fresh);
    return refused;
  }

  /** Adds a checked entry of `source`'s listing to `fresh`, unless the listing or another source already has the name. */
  #admit(entry: Entry, source: string, fresh: Map<string, Entry>): void {
    const holder = this.#entries.get(entry.tool.name);
    if (fresh.has(entry.tool.name) || (holder !== undefined && holder.source !== source)) {
      throw new ToolRegistrationError(entry.tool.name, 'a tool with this name is already registered');
    }
    fresh.set(entry.tool.name, entry);
  }

  /** Puts `fresh` in place of `source`'s entries, where they stood; says so to listeners unless nothing published changed. */
  #install(source: string, fresh: ReadonlyMap<string, Entry>): void {
    const next = new Map<string, Entry>();
    let placed = false;
    for (const [name, entry] of this.#entries) {
      if (entry.source !== source) next.set(name, entry);
      else if (!placed) {
        for (const [freshName, freshEntry] of fresh) next.set(freshName, freshEntry);
        placed = true;
      }
    }
    if (!placed) for (const [freshName, freshEntry] of fresh) next.set(freshName, freshEntry);
    const before = [...this.#entries.values()];
    const after = [...next.values()];
    this.#entries.clear();
    for (const [name, entry] of next) this.#entries.set(name, entry);
    // The same definitions again (a re-list that found no change): the lists, their bytes and ETags stay.
    if (!(before.length === after.length && before.every((e, i) => sameTool(e.tool, after[i]!.tool)))) this.#changed();
  }

  /**
   * The entries of `source` whose compiled schemas the tools of the same name in `tools` can keep.
   * An Ajv holds every schema it compiled, replaced ones too, for as long as one of its
   * validators is in use: when keeping would leave the source's tools on more than
   * `MAX_GENERATIONS` instances, none is kept and all compile anew, so a source holds at most that
   * many lists' worth of compiled schemas however its tools change.
   */
  #reusable(source: string, tools: readonly ToolDef[]): Map<string, Entry> {
    const reusable = new Map<string, Entry>();
    const generations = new Set<object>();
    let compiles = false;
    for (const tool of tools) {
      const earlier = typeof tool?.name === 'string' ? this.#entries.get(tool.name) : undefined;
      if (earlier !== undefined && earlier.source === source && sameSchemas(earlier.tool, tool)) {
        reusable.set(tool.name, earlier);
        generations.add(earlier.generation);
      } else compiles = true;
    }
    return generations.size + (compiles ? 1 : 0) > MAX_GENERATIONS ? new Map() : reusable;
  }

  /** The source a tool came from (`replaceSource`); '' for a tool registered alone, undefined for no such tool. */
  sourceOf(name: string): string | undefined {
    return this.#entries.get(name)?.source;
  }

  /** Calls `listener` after every change of the set of tools; returns what stops it. */
  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #changed(): void {
    this.#published = undefined;
    this.#scoped = new WeakMap();
    for (const listener of this.#listeners) listener();
  }

  /**
   * Checks a tool against every rule and compiles its schemas with `compiler` (or keeps those of
   * `compiler`, an earlier entry with the same schemas); throws `ToolRegistrationError`. A tool
   * registered alone (the operator's code: built-ins, plug-ins) has its schemas checked now and
   * compiled on its first call (see `CompileOptions.lazy`), so a thousand tools start in a
   * fraction of the time and memory; a source's schemas, not the operator's, compile now.
   */
  #check(tool: ToolDef, source = '', compiler: Entry | (() => Ajv) = () => this.#ajv): Entry {
    const name = this.#checkRules(tool);
    if (typeof compiler !== 'function')
      return { tool, source, validate: compiler.validate, checkOutput: compiler.checkOutput, generation: compiler.generation };
    const ajv = compiler();
    let validate: InputValidator;
    try {
      validate = compileInputSchema(tool.inputSchema, ajv, { lazy: source === '' });
    } catch (err) {
      throw new ToolRegistrationError(name, `the input schema does not compile: ${(err as Error).message}`);
    }
    const checkOutput = tool.outputSchema === undefined ? undefined : this.#compileOutput(name, tool.outputSchema, ajv, source === '');
    return { tool, source, validate, checkOutput, generation: ajv };
  }

  /** Checks a tool against every rule but its schemas' compiling; returns its name, or throws `ToolRegistrationError`. */
  #checkRules(tool: ToolDef): string {
    const name = nameOf(tool);
    if (typeof tool?.name !== 'string' || !TOOL_NAME.test(name)) throw new ToolRegistrationError(name, `the name must match ${TOOL_NAME.source}`);
    if (typeof tool.description !== 'string') throw new ToolRegistrationError(name, 'the description must be a string');
    if (typeof tool.execute !== 'function') throw new ToolRegistrationError(name, 'execute must be a function');
    if (tool.timeoutMs !== undefined && !(Number.isInteger(tool.timeoutMs) && tool.timeoutMs > 0 && tool.timeoutMs <= MAX_TIMEOUT_MS)) {
      throw new ToolRegistrationError(name, `timeoutMs must be a positive integer of at most ${MAX_TIMEOUT_MS}`);
    }
    if (tool.maxConcurrency !== undefined && !(Number.isInteger(tool.maxConcurrency) && tool.maxConcurrency > 0)) {
      throw new ToolRegistrationError(name, 'maxConcurrency must be a positive integer');
    }
    const schema: unknown = tool.inputSchema;
    if (typeof schema !== 'object' || schema === null || (schema as { type?: unknown }).type !== 'object') {
      throw new ToolRegistrationError(name, 'the input schema\'s root must be { "type": "object" }');
    }
    const combinator = ROOT_COMBINATORS.find((k) => k in schema);
    if (combinator) throw new ToolRegistrationError(name, `the input schema's root must not use ${combinator}`);
    const badProperty = findBadPropertyName(schema);
    if (badProperty !== undefined) {
      throw new ToolRegistrationError(name, `property name ${JSON.stringify(badProperty)} must match ${PROPERTY_NAME.source}`);
    }
    return name;
  }

  /** The output schema checked as input schemas are, where MCP's rules allow: its root an object. */
  #compileOutput(name: string, schema: unknown, ajv: Ajv, lazy: boolean): OutputValidator {
    const rule = outputRootRule(schema);
    if (rule !== undefined) throw new ToolRegistrationError(name, rule);
    try {
      return compileOutputSchema(schema as ObjectSchema, ajv, { lazy });
    } catch (err) {
      throw new ToolRegistrationError(name, `the output schema does not compile: ${(err as Error).message}`);
    }
  }

  /** The tool with this name, if registered. */
  get(name: string): ToolDef | undefined {
    return this.#entries.get(name)?.tool;
  }

  /** Every tool, in registration order. */
  list(): ToolDef[] {
    return [...this.#entries.values()].map((e) => e.tool);
  }

  /** The tool's input validator (its schema checked at registration, compiled once: then or on first use). */
  validator(name: string): InputValidator | undefined {
    return this.#entries.get(name)?.validate;
  }

  /** The tool's output validator, when it declares an output schema (compiled once, as the input validator). */
  outputValidator(name: string): OutputValidator | undefined {
    return this.#entries.get(name)?.checkOutput;
  }

  /**
   * The tools in a model provider's format: all of them, or those in `scope` (in registration
   * order). Computed once per (scope, format) until the next `register`.
   */
  toAPI<F extends APIFormat = 'anthropic'>(format?: F, scope?: ToolScope, options?: ListOptions): APIShapes[F] {
    return this.#publication(format ?? 'anthropic', scope, options?.strict === true).shaped as APIShapes[F];
  }

  /**
   * `toAPI` as the JSON text to send: serialised once per (scope, format) until the next
   * `register`, so answering a list costs no serialisation.
   */
  listJSON(format: APIFormat = 'anthropic', scope?: ToolScope, options?: ListOptions): string {
    const publication = this.#publication(format, scope, options?.strict === true);
    return (publication.text ??= JSON.stringify(publication.shaped));
  }

  /** `listJSON` as UTF-8 bytes, made once too: what an HTTP answer sends, with nothing to encode per request. */
  listBytes(format: APIFormat = 'anthropic', scope?: ToolScope, options?: ListOptions): Buffer {
    const publication = this.#publication(format, scope, options?.strict === true);
    return (publication.bytes ??= Buffer.from(this.listJSON(format, scope, options)));
  }

  /**
   * The tools in `scope` (all of them when undefined), in registration order: the same array for
   * the same scope until the next `register`, so a caller may cache what it derives from it.
   */
  tools(scope?: ToolScope): readonly ToolDef[] {
    return this.#publishedFor(scope).tools;
  }

  #publication(format: APIFormat, scope: ToolScope | undefined, strict: boolean): Publication {
    const published = this.#publishedFor(scope);
    const key = strict ? `${format}+strict` : format;
    let publication = published.formats.get(key);
    if (publication === undefined) {
      publication = { shaped: formatTools(published.tools, format, { strict }), text: undefined, bytes: undefined };
      published.formats.set(key, publication);
    }
    return publication;
  }

  #publishedFor(scope: ToolScope | undefined): Published {
    let published = scope === undefined ? this.#published : this.#scoped.get(scope);
    if (published === undefined) {
      const all = this.list();
      const permissions = scope?.permissions;
      const shown = scope === undefined ? all : all.filter((t) => scope.has(t.name));
      published = { tools: Object.freeze(permissions === undefined ? shown : shown.map((t) => withRules(t, permissions))), formats: new Map() };
      if (scope === undefined) this.#published = published;
      else this.#scoped.set(scope, published);
    }
    return published;
  }
}

/** The tool as a caller with rules sees it: its rules in its description's last line, so a model does not waste calls on what they refuse. */
function withRules(tool: ToolDef, permissions: Permissions): ToolDef {
  const line = permissions.summary(tool.name, tool.rules?.access);
  return line === undefined ? tool : { ...tool, description: `${tool.description}\n\n${line}` };
}

/** The tools of one scope, and their lists by format. */
interface Published {
  tools: readonly ToolDef[];
  /** Keyed by format, and `<format>+strict` for strict mode. */
  formats: Map<string, Publication>;
}

/** A tool list in one format, and its JSON text and bytes once asked for. */
interface Publication {
  shaped: unknown;
  text: string | undefined;
  bytes: Buffer | undefined;
}

/** A tool's name for a refusal: what it says, even when that is not a string. */
function nameOf(tool: ToolDef): string {
  return typeof tool?.name === 'string' ? tool.name : String(tool?.name);
}

/** Whether two tools publish the same definition (a source that lists again gives new objects for the same tools). */
function sameTool(a: ToolDef, b: ToolDef): boolean {
  if (a === b) return true;
  const published = (t: ToolDef) => JSON.stringify([t.name, t.description, t.inputSchema, t.outputSchema, t.annotations, t.timeoutMs, t.maxConcurrency]);
  return published(a) === published(b);
}

/** Whether two tools declare the same schemas, so one's compiled validators serve the other. */
function sameSchemas(a: ToolDef, b: ToolDef): boolean {
  if (a.inputSchema === b.inputSchema && a.outputSchema === b.outputSchema) return true;
  return JSON.stringify([a.inputSchema, a.outputSchema]) === JSON.stringify([b.inputSchema, b.outputSchema]);
}

/** Walks a schema and returns the first property name (at any depth) that breaks the rule. */
function findBadPropertyName(node: unknown): string | undefined {
  if (Array.isArray(node)) {
    for (const item of node) {
      const bad = findBadPropertyName(item);
      if (bad !== undefined) return bad;
    }
    return undefined;
  }
  if (typeof node !== 'object' || node === null) return undefined;
  for (const [keyword, value] of Object.entries(node)) {
    if (keyword === 'properties' && isRecord(value)) {
      for (const [prop, sub] of Object.entries(value)) {
        if (!PROPERTY_NAME.test(prop)) return prop;
        const bad = findBadPropertyName(sub);
        if (bad !== undefined) return bad;
      }
    } else if (keyword !== 'enum' && keyword !== 'const' && keyword !== 'default' && keyword !== 'examples') {
      const bad = findBadPropertyName(value);
      if (bad !== undefined) return bad;
    }
  }
  return undefined;
}
