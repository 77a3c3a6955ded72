/** Subscribes a listener to changes of the tool list; returns what unsubscribes it (`ToolRegistry.onChange` fits). */
export type ToolsChange = (listener: () => void) => () => void;

/** How many subscriptions may be open at once, and how often they hear of changes. */
export interface SubscriptionLimits {
  /** Per caller (an API key's label, or a client's address group without keys). Default 16. */
  perCaller?: number;
  /** In all, for the transport. Default 1024. */
  total?: number;
  /** At most one change told per this long (see {@link coalesced}). Default DEFAULT_LIST_CHANGED_INTERVAL_MS; 0 tells each at once. */
  listChangedIntervalMs?: number;
}

/** What an open subscription hears. */
export interface Subscriber {
  /** The tool list changed (the caller's tools may or may not be among the changed ones). */
  changed(): void;
  /** The server ends the subscription (shutdown); `close` need not be called after it. */
  ended(): void;
}

/** A subscription that was let in: `close` ends it (the client went away or cancelled it). */
export interface Subscription {
  close(): void;
}

/** Why a subscription was not let in: the message, and whose share is taken (the caller's, or the transport's in all). */
export interface SubscriptionRefusal {
  refused: string;
  limit: 'caller' | 'server';
}

/** Opens subscriptions for one caller (the hub's `of`). */
export interface SubscriptionOpener {
  open(subscriber: Subscriber): Subscription | SubscriptionRefusal;
}

/** What a client not on a listen stream hears when the tools change (stdio, and the 2025 revisions' GET stream). */
export const LIST_CHANGED = { jsonrpc: '2.0', method: 'notifications/tools/list_changed' } as const;

export const DEFAULT_MAX_SUBSCRIPTIONS_PER_CALLER = 16;
export const DEFAULT_MAX_SUBSCRIPTIONS = 1024;
/**
 * A client hears of changes of the tool list at most once a second: each one makes it fetch
 * `tools/list` again, and an upstream that changes its tools without pause must not make every
 * client do so without pause.
 */
export const DEFAULT_LIST_CHANGED_INTERVAL_MS = 1000;

/**
 * `tell` at most once per `intervalMs`: a change is told at once when none was told within the
 * interval, and the changes within it are told as one at its end, so the last change is always
 * told. `cancel` drops one waiting to be told (no one listens any more). An `intervalMs` of 0 tells
 * each change at once.
 */
export function coalesced(tell: () => void, intervalMs: number): (() => void) & { cancel(): void } {
  let timer: NodeJS.Timeout | undefined;
  let waiting = false;
  const quietFor = (): void => {
    timer = setTimeout(() => {
      timer = undefined;
      if (!waiting) return;
      waiting = false;
      tell();
      quietFor();
    }, intervalMs);
    timer.unref();
  };
  const change = (): void => {
    if (timer !== undefined) {
      waiting = true;
      return;
    }
    tell();
    if (intervalMs > 0) quietFor();
  };
  return Object.assign(change, {
    cancel: () => {
      clearTimeout(timer);
      timer = undefined;
      waiting = false;
    },
  });
}

/**
 * The open subscriptions to tool-list changes of one transport (`subscriptions/listen`, and the
 * standalone GET stream of the 2025 revisions over HTTP), bounded per caller and in all, so that
 * one key cannot hold every stream the server can keep. One listener on the tool source serves
 * them all, registered while any is open, and tells them of changes at most once per
 * `listChangedIntervalMs` (see {@link coalesced}), however often the list changes. Without a tool
 * source (the tool list never changes) nothing is ever heard, and `live` is false.
 */
export class SubscriptionHub {
  readonly #toolsChange: ToolsChange | undefined;
  readonly #perCaller: number;
  readonly #total: number;
  // One entry per subscription (a subscriber may be given more than once).
  readonly #open = new Set<{ caller: string; subscriber: Subscriber }>();
  readonly #byCaller = new Map<string, number>();
  #unsubscribe: (() => void) | undefined;
  #closed = false;
  readonly #changed: (() => void) & { cancel(): void };

  constructor(toolsChange: ToolsChange | undefined, limits: SubscriptionLimits = {}) {
    this.#toolsChange = toolsChange;
    this.#perCaller = limits.perCaller ?? DEFAULT_MAX_SUBSCRIPTIONS_PER_CALLER;
    this.#total = limits.total ?? DEFAULT_MAX_SUBSCRIPTIONS;
    this.#changed = coalesced(this.#tellAll, limits.listChangedIntervalMs ?? DEFAULT_LIST_CHANGED_INTERVAL_MS);
  }

  /** Whether the tool list can change, so a subscription has something to hear. */
  get live(): boolean {
    return this.#toolsChange !== undefined;
  }

  /** Subscriptions open now, of every caller. */
  get size(): number {
    return this.#open.size;
  }

  /** What opens subscriptions for `caller` (its `admissionName`, '' for a caller without one). */
  of(caller: string): SubscriptionOpener {
    return { open: (subscriber) => this.open(caller, subscriber) };
  }

  /** Lets a subscription in, or says why not (the caller's share, or the transport's, is taken). */
  open(caller: string, subscriber: Subscriber): Subscription | SubscriptionRefusal {
    if (this.#closed) return { refused: 'The server is shutting down and opens no subscription; subscribe again elsewhere', limit: 'server' };
    const held = this.#byCaller.get(caller) ?? 0;
    if (held >= this.#perCaller) {
      return { refused: `Subscription limit reached: one caller may hold at most ${this.#perCaller} open subscriptions; close one first`, limit: 'caller' };
    }
    if (this.#open.size >= this.#total) {
      return { refused: `Subscription limit reached: the server keeps at most ${this.#total} open subscriptions; try again later`, limit: 'server' };
    }
    const entry = { caller, subscriber };
    this.#open.add(entry);
    this.#byCaller.set(caller, held + 1);
    this.#unsubscribe ??= this.#toolsChange?.(this.#changed);
    return { close: () => this.#remove(entry) };
  }

  /** Ends every subscription (shutdown): each one hears `ended`, and none opens after. */
  closeAll(): void {
    this.#closed = true;
    for (const entry of [...this.#open]) {
      this.#remove(entry);
      entry.subscriber.ended();
    }
  }

  readonly #tellAll = (): void => {
    // A copy: a subscriber may close itself (or another) while it hears the change.
    for (const entry of [...this.#open]) if (this.#open.has(entry)) entry.subscriber.changed();
  };

  #remove(entry: { caller: string; subscriber: Subscriber }): void {
    if (!this.#open.delete(entry)) return;
    const { caller } = entry;
    const held = this.#byCaller.get(caller)! - 1;
    if (held === 0) this.#byCaller.delete(caller);
    else this.#byCaller.set(caller, held);
    if (this.#open.size === 0) {
      this.#unsubscribe?.();
      this.#unsubscribe = undefined;
      this.#changed.cancel();
    }
  }
}
