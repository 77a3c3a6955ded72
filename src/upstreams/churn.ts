/** How often an upstream may change what it serves (see {@link ChurnGuard}). */
export interface ChurnLimits {
  /** Changes applied within `windowMs`; one more starts a hold. */
  changes: number;
  windowMs: number;
  /** How long a hold lasts. */
  holdMs: number;
}

/**
 * Each change of an upstream's tools is compiled (its schemas, its patterns) and told to every MCP
 * client. An upstream changes its list at start-up and when its user does something: a handful of
 * times a minute at most. One that announces without pause is listed about 6 times a minute (the
 * re-list spacing's cap), so past 5 changes in a minute it is held for 5 minutes: about one change
 * a minute at most, however it behaves, and the last list it gave is applied when the hold ends.
 */
export const CHURN_LIMITS: ChurnLimits = { changes: 5, windowMs: 60_000, holdMs: 5 * 60_000 };

/** A hold that started: since and until when (ms since the epoch), and what brought it on. */
export interface ChurnHold {
  since: number;
  until: number;
  /** Changes applied within the window before it. */
  changes: number;
}

/** What a guard tells: a hold started (once per hold), and it ended. */
export interface ChurnEvents {
  onHold(hold: ChurnHold): void;
  onRelease(): void;
}

/**
 * Counts the listings of one upstream that changed what it serves. `admit` says whether a change
 * may be applied now: past the budget it starts a hold, and says no until the hold ends; then
 * `onRelease` is called, and the count starts again from nothing.
 */
export class ChurnGuard {
  readonly #limits: ChurnLimits;
  readonly #events: ChurnEvents;
  // When the changes applied within the window were, oldest first (at most `limits.changes`).
  #times: number[] = [];
  #hold: ChurnHold | undefined;
  #timer: NodeJS.Timeout | undefined;

  constructor(limits: ChurnLimits, events: ChurnEvents) {
    this.#limits = limits;
    this.#events = events;
  }

  /** The hold in force, if any. */
  get hold(): ChurnHold | undefined {
    return this.#hold;
  }

  /** A change now: true, counted (apply it); false while held, a hold starting with the one past the budget. */
  admit(): boolean {
    if (this.#hold !== undefined) return false;
    const now = Date.now();
    this.#times = this.#times.filter((time) => time > now - this.#limits.windowMs);
    if (this.#times.length < this.#limits.changes) {
      this.#times.push(now);
      return true;
    }
    this.#hold = { since: now, until: now + this.#limits.holdMs, changes: this.#times.length };
    this.#timer = setTimeout(() => this.#release(), this.#limits.holdMs);
    this.#timer.unref();
    this.#events.onHold(this.#hold);
    return false;
  }

  #release(): void {
    this.#hold = undefined;
    this.#timer = undefined;
    this.#times = [];
    this.#events.onRelease();
  }

  /** Ends the guard (the upstream stops): no release comes after. */
  close(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}

export const HOLD_STARTED = 'upstream tool list changes too often: its new lists are not applied until the hold ends (the last one applied is served)';
export const HOLD_ENDED = 'upstream tool list hold ended: its newest list is applied';

/** The numbers of a hold, for its log line. */
export function holdFields(hold: ChurnHold, limits: ChurnLimits): Record<string, unknown> {
  return { changes: hold.changes, windowSeconds: limits.windowMs / 1000, holdSeconds: limits.holdMs / 1000, until: new Date(hold.until).toISOString() };
}

/** What `/readyz` says of a hold. */
export function frozenStatus(hold: ChurnHold, limits: ChurnLimits): { reason: string; since: string; until: string } {
  return {
    reason: `its tool list changed more than ${limits.changes} times within ${limits.windowMs / 1000} s; its new lists are not applied until the hold ends, and the last one applied is served`,
    since: new Date(hold.since).toISOString(),
    until: new Date(hold.until).toISOString(),
  };
}
