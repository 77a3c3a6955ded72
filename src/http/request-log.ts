import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions } from 'pino';

type Log = (...args: unknown[]) => void;

/**
 * A logger whose children are bound only when something logs through them. Fastify makes a child
 * per request for `request.log`, yet with its request logging off nothing on the hot path logs
 * there (a tool call's audit line comes from the gateway, with the request id as a field): a pino
 * child was paid on every request and used on almost none. Give Fastify `lazyLogger(pino)` as its
 * `loggerInstance`: every child it makes is then this object, and the pino child is made when the
 * first line is logged. (Not a `childLoggerFactory`: Fastify checks the logger a custom factory
 * returns, seven methods with an array and closures, on every request.)
 */
export class RequestLog implements FastifyBaseLogger {
  readonly #parent: FastifyBaseLogger;
  readonly #bindings: Bindings;
  readonly #options: ChildLoggerOptions;
  #child: FastifyBaseLogger | undefined;

  constructor(parent: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions) {
    this.#parent = parent;
    this.#bindings = bindings;
    this.#options = options;
  }

  /** A root over `logger` itself: its lines are `logger`'s, with no child between. */
  static over(logger: FastifyBaseLogger): RequestLog {
    const root = new RequestLog(logger, {}, {});
    root.#child = logger;
    return root;
  }

  /** The bound logger, made on first use (the parents' too, if they were never used). */
  get #bound(): FastifyBaseLogger {
    if (this.#child !== undefined) return this.#child;
    const parent = this.#parent instanceof RequestLog ? this.#parent.#bound : this.#parent;
    return (this.#child = parent.child(this.#bindings, this.#options));
  }

  get level(): string {
    return this.#child?.level ?? this.#options.level ?? this.#parent.level;
  }

  set level(level: string) {
    this.#bound.level = level;
  }

  fatal(...args: unknown[]): void {
    (this.#bound.fatal as Log)(...args);
  }

  error(...args: unknown[]): void {
    (this.#bound.error as Log)(...args);
  }

  warn(...args: unknown[]): void {
    (this.#bound.warn as Log)(...args);
  }

  info(...args: unknown[]): void {
    (this.#bound.info as Log)(...args);
  }

  debug(...args: unknown[]): void {
    (this.#bound.debug as Log)(...args);
  }

  trace(...args: unknown[]): void {
    (this.#bound.trace as Log)(...args);
  }

  silent(): void {}

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return new RequestLog(this, bindings, options ?? {});
  }
}

/** Fastify's `loggerInstance`: `logger`, with children made lazily (see `RequestLog`). */
export function lazyLogger(logger: FastifyBaseLogger): FastifyBaseLogger {
  return RequestLog.over(logger);
}
