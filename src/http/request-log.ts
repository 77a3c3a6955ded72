import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions } from 'pino';

type Log = (...args: unknown[]) => void;

/**
 * `request.log`, bound to the request id only when something logs through it. Fastify makes a
 * pino child per request for it, yet with its request logging off nothing on the hot path logs
 * there (a tool call's audit line comes from the gateway, with the request id as a field): the
 * child was paid on every request and used on almost none. Use it as `childLoggerFactory`.
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

  /** The child logger, made on first use. */
  get #bound(): FastifyBaseLogger {
    return (this.#child ??= this.#parent.child(this.#bindings, this.#options));
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
    return this.#bound.child(bindings, options);
  }
}

/** Fastify's `childLoggerFactory`: a `RequestLog` in place of a pino child per request. */
export function requestLog(logger: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions): FastifyBaseLogger {
  return new RequestLog(logger, bindings, options);
}
