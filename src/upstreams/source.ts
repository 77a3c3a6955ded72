import type { Logger } from 'pino';
import { ToolportError } from '../core/errors.js';
import { errorResult } from '../core/result.js';
import type { ToolRegistry } from '../core/registry.js';
import type { ToolDef, ToolResult } from '../core/types.js';
import { fromMCPCallResult } from '../providers/mcp-content.js';
import type { UpstreamSpec } from './config.js';
import { CHURN_LIMITS, ChurnGuard, frozenStatus, holdFields, HOLD_ENDED, HOLD_STARTED, type ChurnLimits } from './churn.js';
import { checkDefinitions, type DefinitionRefusal, type UpstreamToolDefinition } from './definitions.js';
import { ListingLane } from './lane.js';
import { redactProgress, redactResult } from './redact.js';
import { admitted, type HeldTool, type LockFile } from './lock/lock.js';
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
  /** How often an upstream may change what it serves before its new lists are held (default CHURN_LIMITS). */
  churn?: ChurnLimits;
}

/** What `/readyz` shows of an upstream: its state, and whether its new tool lists are held back (it changes them too often). */
export interface UpstreamSourceStatus extends UpstreamStatus {
  /** Present during a hold: why, and when it started and ends (ISO 8601); the last list applied is served meanwhile. */
  frozen?: { reason: string; since: string; until: string };
}

/** One listing of an upstream, checked and held to the lock: what it would serve, and what not. */
interface Listing {
  served: UpstreamToolDefinition[];
  refused: DefinitionRefusal[];
  held: HeldTool[];
  /** The names and digests served, in order: a listing with the same changes nothing. */
  key: string;
}

/** One upstream's listings on their way into the registry, and what is served of it. */
interface Lane {
  readonly upstream: Upstream;
  readonly listings: ListingLane<Listing>;
  readonly churn: ChurnGuard;
  /** Served name to digest: what the registry serves now, and what the newest listing would serve. */
  applied: ReadonlyMap<string, string>;
  listed: ReadonlyMap<string, string>;
  appliedKey: string | undefined;
  /** The newest listing a hold keeps back (applied when the hold ends), and how many were kept back. */
  heldBack: Listing | undefined;
  notApplied: number;
}

/**
 * The upstream MCP servers as one source of tools: each upstream's tool list, checked
 * (`checkDefinitions`) and held to the lock (`admitted`), goes into the registry under the
 * upstream's name with `replaceSource`, at connection and at every change, so lists, their bytes
 * and ETags follow: one listing at a time per upstream, the newest superseding one that waits
 * (`ListingLane`). An upstream that changes what it serves too often is held (`ChurnGuard`): its
 * last applied list is served until the hold ends, and the log and `/readyz` say so. Calls go to
 * the upstream by the tool's own name.
 */
export class UpstreamSource {
  readonly upstreams: readonly Upstream[];
  readonly #registry: ToolRegistry;
  readonly #lanes = new Map<string, Lane>();
  readonly #options: UpstreamSourceOptions;
  readonly #churnLimits: ChurnLimits;

  constructor(specs: readonly UpstreamSpec[], registry: ToolRegistry, options: UpstreamSourceOptions) {
    this.#registry = registry;
    this.#options = options;
    this.#churnLimits = options.churn ?? CHURN_LIMITS;
    this.upstreams = specs.map(
      (spec) =>
        new Upstream(spec, {
          ...options.upstream,
          baseEnv: options.baseEnv,
          confinement: options.confinement,
          log: options.log.child({ upstream: spec.name }),
          version: options.version,
          onTools: (tools) => void this.#listed(this.#lanes.get(spec.name)!, tools),
          onState: (state) => options.onState?.(spec.name, state),
        }),
    );
    for (const upstream of this.upstreams) this.#lanes.set(upstream.name, this.#laneOf(upstream));
  }

  #laneOf(upstream: Upstream): Lane {
    const log = this.#options.log;
    const lane: Lane = {
      upstream,
      listings: new ListingLane(
        (listing) => this.#apply(lane, listing),
        (err) => log.error({ upstream: upstream.name, err }, 'upstream tool list could not be applied'),
      ),
      churn: new ChurnGuard(this.#churnLimits, {
        onHold: (hold) => log.warn({ upstream: upstream.name, ...holdFields(hold, this.#churnLimits) }, HOLD_STARTED),
        onRelease: () => this.#released(lane),
      }),
      applied: new Map(),
      listed: new Map(),
      appliedKey: undefined,
      heldBack: undefined,
      notApplied: 0,
    };
    return lane;
  }

  /**
   * Starts the eager upstreams and waits until each is ready or has failed once (a failed one goes
   * on restarting in the background): an upstream never keeps the built-in tools from serving.
   */
  async start(): Promise<void> {
    await Promise.all(
      this.upstreams.map(async (upstream) => {
        const lane = this.#lanes.get(upstream.name)!;
        // Lazy: the tools the lock pins are served until the first call starts the process (its
        // own list then replaces them, under the same lock); without pinned tools, listed once now.
        const pinned = this.#options.lock?.upstreams[upstream.name];
        if (upstream.spec.startup === 'lazy' && pinned !== undefined && Object.hasOwn(this.#options.lock!.upstreams, upstream.name)) {
          return this.#listed(
            lane,
            Object.values(pinned).map((locked) => locked.definition),
          );
        }
        await (upstream.spec.startup === 'eager' ? upstream.start() : upstream.probe()).catch(() => undefined);
        // Its first listing was given as it connected: served once applied.
        return lane.listings.settle();
      }),
    );
  }

  /** Each upstream's state, by name: for `/readyz`. */
  status(): Record<string, UpstreamSourceStatus> {
    return Object.fromEntries(
      this.upstreams.map((u) => {
        const hold = this.#lanes.get(u.name)!.churn.hold;
        return [u.name, hold === undefined ? u.status() : { ...u.status(), frozen: frozenStatus(hold, this.#churnLimits) }];
      }),
    );
  }

  /** The namespace patterns (`github__*`) of the upstreams: a key's `tools` may name them before their tools are listed. */
  namespaces(): string[] {
    return this.upstreams.map((u) => `${u.spec.prefix}${u.spec.prefix === '' ? '' : u.spec.separator}*`).filter((p) => p !== '*');
  }

  /** Stops every upstream (their process groups too). */
  async stop(): Promise<void> {
    for (const lane of this.#lanes.values()) lane.churn.close();
    await Promise.all(this.upstreams.map((u) => u.stop()));
    if (typeof this.#options.confinement === 'object') await this.#options.confinement.close();
  }

  /** Checks a listing now (what the upstream lists is known at once) and gives it to the lane; resolves once it, or a newer one, is settled. */
  #listed(lane: Lane, wire: readonly unknown[]): Promise<void> {
    const { tools, refused } = checkDefinitions(lane.upstream.spec, [...wire]);
    const { served, held } = admitted(this.#options.lock, lane.upstream.name, tools);
    lane.listed = new Map(served.map((d) => [d.name, d.digest]));
    return lane.listings.give({ served, refused, held, key: served.map((d) => `${d.name}\0${d.digest}`).join('\n') });
  }

  /** Applies a listing to the registry, or keeps it back while the upstream is held; what is served is updated once applied. */
  async #apply(lane: Lane, listing: Listing): Promise<void> {
    const { upstream } = lane;
    if (listing.key === lane.appliedKey) lane.heldBack = undefined;
    else if (!lane.churn.admit()) {
      lane.heldBack = listing;
      lane.notApplied++;
      return;
    }
    const { served, refused, held } = listing;
    const locked = this.#options.lock !== undefined;
    const tools = served.map((definition) => toolOf(upstream, definition, locked, (d, started) => this.#serves(lane, d, started)));
    const rejected = await replaced(this.#registry, upstream.name, tools);
    if (rejected === 'superseded') return;
    const refusedNames = new Set(rejected.map((r) => r.name));
    lane.applied = new Map(served.filter((d) => !refusedNames.has(d.name)).map((d) => [d.name, d.digest]));
    lane.appliedKey = listing.key;
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

  /** A hold ended: said once, and the newest listing it kept back is applied (unless a newer one is on its way). */
  #released(lane: Lane): void {
    this.#options.log.info({ upstream: lane.upstream.name, notApplied: lane.notApplied }, HOLD_ENDED);
    const listing = lane.heldBack;
    lane.heldBack = undefined;
    lane.notApplied = 0;
    if (listing !== undefined && lane.listings.settled) void lane.listings.give(listing);
  }

  /**
   * Whether a call of `definition` may go to the upstream. Under a lock, and after a lazy
   * upstream `started` for the call, what is served of it must still be that definition once the
   * listings given so far are applied; under a lock, the newest listing must pin it too (a hold
   * may keep a change from being applied, never from being refused).
   */
  #serves(lane: Lane, definition: UpstreamToolDefinition, started: boolean): boolean | Promise<boolean> {
    if (this.#options.lock === undefined && !started) return true;
    const check = (): boolean =>
      lane.applied.get(definition.name) === definition.digest && (this.#options.lock === undefined || lane.listed.get(definition.name) === definition.digest);
    return lane.listings.settled ? check() : lane.listings.settle().then(check);
  }
}

/**
 * Puts an upstream's tools in the registry, their schemas compiled off the event loop, resolving
 * once they are served ('superseded': a newer replacement of the same source took its place).
 */
function replaced(registry: ToolRegistry, source: string, tools: readonly ToolDef[]): Promise<Array<{ name: string; reason: string }> | 'superseded'> {
  return registry.replaceSourceAsync(source, tools);
}

// Tools named in the summary line of a listing, of each kind (refused by the checks, held by the
// lock, refused by the registry); the counts cover the rest.
const SHOWN_OF_EACH = 3;
const HELD_REASONS = {
  changed: 'its definition differs from the lock file (see toolport upstreams diff)',
  new: 'it is not in the lock file (run toolport upstreams lock to serve it)',
} as const;

/**
 * An upstream tool as a ToolDef: its checked definition, and a call that goes to the upstream
 * while `serves` says it still stands for that definition.
 */
function toolOf(
  upstream: Upstream,
  definition: UpstreamToolDefinition,
  locked: boolean,
  serves: (definition: UpstreamToolDefinition, started: boolean) => boolean | Promise<boolean>,
): ToolDef {
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
        // A lazy upstream's tools were served from the lock: the process's own list, read as it
        // starts, must still pin this definition (once applied), or the call would run what was
        // not reviewed. Under a lock, so must every newer list, applied yet or not.
        const started = upstream.state === 'idle';
        if (started) await upstream.start();
        const still = serves(definition, started);
        if (!(typeof still === 'boolean' ? still : await still)) {
          return errorResult(
            locked
              ? `Upstream "${upstream.name}" now lists a definition of ${definition.upstreamName} that differs from the one pinned in the lock file: the tool is held until \`toolport upstreams lock\` is run again.`
              : `Upstream "${upstream.name}" now lists a definition of ${definition.upstreamName} other than the one this call was made for: list the tools again and call it as it is now.`,
          );
        }
        const call = (traceContext?: Readonly<Record<string, string>>): Promise<unknown> =>
          upstream.call(definition.upstreamName, input, {
            signal: context.signal,
            caller: context.caller,
            onProgress: context.progress && ((update) => context.progress!(redactProgress(update, upstream.redact))),
            traceContext,
          });
        // Traced: the upstream call is a client span of its own, whose context the upstream continues.
        const wire =
          context.trace === undefined
            ? await call()
            : await context.trace.client(`tools/call ${definition.upstreamName}`, upstreamSpanAttributes(upstream, definition.upstreamName), call);
        return redactResult(fromMCPCallResult(wire), upstream.redact);
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

/** The attributes of an upstream call's client span (the MCP conventions' client span); never its headers, input or result. */
function upstreamSpanAttributes(upstream: Upstream, tool: string): Record<string, string | number> {
  const attributes: Record<string, string | number> = {
    'mcp.method.name': 'tools/call',
    'gen_ai.operation.name': 'execute_tool',
    'gen_ai.tool.name': tool,
    'toolport.upstream': upstream.name,
  };
  if (upstream.spec.transport === 'http') {
    const url = new URL(upstream.spec.url);
    attributes['server.address'] = url.hostname;
    attributes['network.transport'] = 'tcp';
    if (url.port !== '') attributes['server.port'] = Number(url.port);
  } else attributes['network.transport'] = 'pipe';
  return attributes;
}
