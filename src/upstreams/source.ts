import type { Logger } from 'pino';
import { ToolportError } from '../core/errors.js';
import { errorResult } from '../core/result.js';
import type { ToolRegistry } from '../core/registry.js';
import type { ToolDef, ToolResult } from '../core/types.js';
import { fromMCPCallResult } from '../providers/mcp-content.js';
import type { UpstreamSpec } from './config.js';
import { checkDefinitions, type UpstreamToolDefinition } from './definitions.js';
import { admitted, type HeldTool, type LockFile } from './lock.js';
import type { UpstreamConfinement } from './confinement.js';
import { Upstream, UpstreamUnavailableError, type UpstreamOptions, type UpstreamState, type UpstreamStatus } from './upstream.js';

export interface UpstreamSourceOptions {
  log: Logger;
  version: string;
  /** The pinned definitions (`toolport upstreams lock`); undefined: every definition is served. */
  lock: LockFile | undefined;
  /** Hears each change of an upstream's state (metrics). */
  onState?(upstream: string, state: UpstreamState): void;
  /** Passed on to each upstream (backoff, re-list interval, timeouts, base environment). */
  upstream?: Partial<Pick<UpstreamOptions, 'relistMs' | 'backoffMs' | 'maxBackoffMs' | 'connectTimeoutMs'>>;
  /** The server's environment: a stdio upstream gets its PATH and HOME. */
  baseEnv: Record<string, string | undefined>;
  /** The stdio upstreams' sandbox, or why there is none; closed by `stop`. */
  confinement?: UpstreamConfinement | string;
}

/**
 * The upstream MCP servers as one source of tools: each upstream's tool list, checked
 * (`checkDefinitions`) and held to the lock (`admitted`), goes into the registry under the
 * upstream's name with `replaceSource`, at connection and at every change, so lists, their bytes
 * and ETags follow. Calls go to the upstream by the tool's own name.
 */
export class UpstreamSource {
  readonly upstreams: readonly Upstream[];
  readonly #registry: ToolRegistry;
  // Served tool name to "<upstream>\0<digest>": what each served name stands for now.
  readonly #digests = new Map<string, string>();
  readonly #options: UpstreamSourceOptions;

  constructor(specs: readonly UpstreamSpec[], registry: ToolRegistry, options: UpstreamSourceOptions) {
    this.#registry = registry;
    this.#options = options;
    this.upstreams = specs.map(
      (spec) =>
        new Upstream(spec, {
          ...options.upstream,
          baseEnv: options.baseEnv,
          confinement: options.confinement,
          log: options.log.child({ upstream: spec.name }),
          version: options.version,
          onTools: (tools) => this.#listed(this.#named(spec.name), tools),
          onState: (state) => options.onState?.(spec.name, state),
        }),
    );
  }

  #named(name: string): Upstream {
    return this.upstreams.find((u) => u.name === name)!;
  }

  /**
   * Starts the eager upstreams and waits until each is ready or has failed once (a failed one goes
   * on restarting in the background): an upstream never keeps the built-in tools from serving.
   */
  async start(): Promise<void> {
    await Promise.all(
      this.upstreams.map(async (upstream) => {
        if (upstream.spec.startup === 'eager') return upstream.start().catch(() => undefined);
        // Lazy: the tools the lock pins are served until the first call starts the process (its
        // own list then replaces them, under the same lock); without pinned tools, listed once now.
        const pinned = this.#options.lock?.upstreams[upstream.name];
        if (pinned !== undefined && Object.hasOwn(this.#options.lock!.upstreams, upstream.name)) {
          this.#listed(
            upstream,
            Object.values(pinned).map((locked) => locked.definition),
          );
          return undefined;
        }
        return upstream.probe().catch(() => undefined);
      }),
    );
  }

  /** Each upstream's state, by name: for `/readyz`. */
  status(): Record<string, UpstreamStatus> {
    return Object.fromEntries(this.upstreams.map((u) => [u.name, u.status()]));
  }

  /** The namespace patterns (`github__*`) of the upstreams: a key's `tools` may name them before their tools are listed. */
  namespaces(): string[] {
    return this.upstreams.map((u) => `${u.spec.prefix}${u.spec.prefix === '' ? '' : u.spec.separator}*`).filter((p) => p !== '*');
  }

  /** Stops every upstream (their process groups too). */
  async stop(): Promise<void> {
    await Promise.all(this.upstreams.map((u) => u.stop()));
    if (typeof this.#options.confinement === 'object') await this.#options.confinement.close();
  }

  #listed(upstream: Upstream, wire: readonly unknown[]): void {
    const { tools, refused } = checkDefinitions(upstream.spec, [...wire]);
    const { served, held } = admitted(this.#options.lock, upstream.name, tools);
    const digest = (name: string): string | undefined => this.#digests.get(name);
    const rejected = this.#registry.replaceSource(
      upstream.name,
      served.map((definition) => toolOf(upstream, definition, digest)),
    );
    for (const [name, entry] of this.#digests) if (entry.startsWith(`${upstream.name}\0`)) this.#digests.delete(name);
    const refusedNames = new Set(rejected.map((r) => r.name));
    for (const definition of served) if (!refusedNames.has(definition.name)) this.#digests.set(definition.name, `${upstream.name}\0${definition.digest}`);
    upstream.tools = served.length - rejected.length;
    upstream.held = refused.length + held.length + rejected.length;
    if (upstream.held === 0) return;
    // One line per listing, however many tools: an upstream that lists 200,000 bad names, or re-lists
    // every few hundred milliseconds, must not fill the log (and crowd out the audit lines) with them.
    // The first few of each kind, so thousands of bad names do not hide the one the lock holds back.
    const first = [
      ...refused.slice(0, SHOWN_OF_EACH).map(({ upstreamName, reason }) => ({ tool: upstreamName, reason })),
      ...held.slice(0, SHOWN_OF_EACH).map(({ upstreamName, reason }) => ({ tool: upstreamName, reason: HELD_REASONS[reason] })),
      ...rejected.slice(0, SHOWN_OF_EACH).map(({ name, reason }) => ({ tool: name, reason })),
    ];
    const count = (reason: HeldTool['reason']) => held.filter((h) => h.reason === reason).length;
    this.#options.log.warn(
      { upstream: upstream.name, notServed: upstream.held, refused: refused.length + rejected.length, changed: count('changed'), new: count('new'), first },
      'upstream tools not served (the first few with their reasons)',
    );
  }
}

// Tools named in the summary line of a listing, of each kind (refused by the checks, held by the
// lock, refused by the registry); the counts cover the rest.
const SHOWN_OF_EACH = 3;
const HELD_REASONS = {
  changed: 'its definition differs from the lock file (see toolport upstreams diff)',
  new: 'it is not in the lock file (run toolport upstreams lock to serve it)',
} as const;

/** An upstream tool as a ToolDef: its checked definition, and a call that goes to the upstream. */
function toolOf(upstream: Upstream, definition: UpstreamToolDefinition, served: (name: string) => string | undefined): ToolDef {
  const annotations = { ...definition.annotations, ...(definition.title !== undefined ? { title: definition.title } : {}) };
  return {
    name: definition.name,
    description: definition.description,
    inputSchema: definition.inputSchema,
    ...(definition.outputSchema !== undefined ? { outputSchema: definition.outputSchema } : {}),
    ...(Object.keys(annotations).length > 0 ? { annotations } : {}),
    ...(upstream.spec.timeoutMs !== undefined ? { timeoutMs: upstream.spec.timeoutMs } : {}),
    async execute(input, context): Promise<ToolResult> {
      try {
        if (upstream.state === 'idle') {
          // A lazy upstream's tools were served from the lock: the process's own list, read as it
          // starts, must still pin this definition, or the call would run what was not reviewed.
          await upstream.start();
          if (served(definition.name) !== `${upstream.name}\0${definition.digest}`) {
            return errorResult(
              `Upstream "${upstream.name}" now lists a definition of ${definition.upstreamName} that differs from the one pinned in the lock file: the tool is held until \`toolport upstreams lock\` is run again.`,
            );
          }
        }
        const wire = await upstream.call(definition.upstreamName, input, {
          signal: context.signal,
          caller: context.caller,
          onProgress: context.progress && ((update) => context.progress!(update)),
        });
        return redacted(fromMCPCallResult(wire), upstream.redact);
      } catch (err) {
        if (err instanceof UpstreamUnavailableError || err instanceof ToolportError) return errorResult(upstream.redact(err.message));
        if (context.signal.aborted) throw err;
        // A JSON-RPC error from the upstream (unknown tool, bad params): its message is for the model.
        const message = upstream.redact(err instanceof Error ? err.message.split('\n')[0]!.slice(0, 2000) : String(err));
        return errorResult(`Upstream "${upstream.name}" refused the call: ${message}`);
      }
    },
  };
}

/**
 * `result` with the upstream's secrets hidden in its text blocks: a careless upstream may echo the
 * token its configuration gave it in an answer or an `isError` result, as it may in a JSON-RPC error.
 */
function redacted(result: ToolResult, redact: (text: string) => string): ToolResult {
  let changed = false;
  const content = result.content.map((block) => {
    if (block.type !== 'text') return block;
    const text = redact(block.text);
    if (text === block.text) return block;
    changed = true;
    return { ...block, text };
  });
  return changed ? { ...result, content } : result;
}
