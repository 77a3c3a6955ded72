import { pino, type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import { logDestination } from './log-destination.js';
import { traceMixin } from './log-trace.js';

/** Log paths that may carry credentials; their values never reach the log (see `redactSecrets`). */
export const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  'headers.cookie',
  '*.apiKey',
  '*.token',
  '*.password',
];

const CENSOR = '[redacted]';
const HEADER_SECRETS = ['authorization', 'cookie'] as const;
const FIELD_SECRETS = ['apiKey', 'token', 'password'] as const;

/**
 * The logged fields with `REDACTED_PATHS` censored, the same object when none is present (the
 * fields themselves are never changed). pino's own `redact` runs a wildcard path over every value
 * of every line, parsing its paths each time: 4% of the CPU of a tool call whose audit line holds
 * nothing but numbers and short strings. Here a line of plain values costs a `typeof` per field;
 * only plain objects (and errors) are looked into. A request or reply object is not plain: its
 * serializer, which never writes headers, decides what of it is logged.
 */
export function redactSecrets(fields: Record<string, unknown>): Record<string, unknown> {
  let copy: Record<string, unknown> | undefined;
  for (const key in fields) {
    const value = fields[key];
    if (typeof value !== 'object' || value === null) continue;
    let clean = value instanceof Error ? censoredError(value) : isPlain(value) ? censored(value, FIELD_SECRETS) : value;
    if (key === 'headers' && isPlain(clean)) clean = censored(clean, HEADER_SECRETS);
    else if (key === 'req' && isPlain(clean) && isPlain(clean['headers'])) {
      const headers = censored(clean['headers'], HEADER_SECRETS);
      if (headers !== clean['headers']) clean = { ...clean, headers };
    }
    if (clean !== value) (copy ??= { ...fields })[key] = clean;
  }
  return copy ?? fields;
}

function isPlain(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** `value` with these properties censored where present, or `value` itself when none is. */
function censored(value: Record<string, unknown>, secrets: readonly string[]): Record<string, unknown> {
  let copy: Record<string, unknown> | undefined;
  for (const secret of secrets) {
    if (value[secret] !== undefined && Object.hasOwn(value, secret)) (copy ??= { ...value })[secret] = CENSOR;
  }
  return copy ?? value;
}

/** An error with a secret among its own properties, as pino's serializer writes it, censored. */
function censoredError(err: Error): unknown {
  if (!FIELD_SECRETS.some((secret) => Object.hasOwn(err, secret))) return err;
  return censored(pino.stdSerializers.err(err) as unknown as Record<string, unknown>, FIELD_SECRETS);
}

/** The service's logger: JSON lines, pretty only when a person is watching a terminal. */
export function createLogger(
  level: LoggerOptions['level'],
  {
    pretty = process.stdout.isTTY === true,
    destination,
    traced = false,
  }: { pretty?: boolean; destination?: DestinationStream; /** Lines written inside a span carry its trace_id and span_id. */ traced?: boolean } = {},
): Logger {
  const options: LoggerOptions = { level, formatters: { log: redactSecrets } };
  // Only a traced process pays for the mixin on each line.
  if (traced) options.mixin = traceMixin;
  if (destination) return pino(options, destination);
  if (pretty) {
    options.transport = { target: 'pino-pretty', options: { colorize: true } };
    return pino(options);
  }
  return pino(options, logDestination());
}

export { BatchedDestination, LOG_BATCH_BYTES, LOG_FLUSH_INTERVAL_MS } from './log-destination.js';
export { logDestination };
