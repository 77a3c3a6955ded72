import { pino, type DestinationStream, type Logger, type LoggerOptions } from 'pino';

/** Log paths that may carry credentials; their values never reach the log. */
export const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  'headers.cookie',
  '*.apiKey',
  '*.token',
  '*.password',
];

/** The service's logger: JSON lines, pretty only when a person is watching a terminal. */
export function createLogger(
  level: LoggerOptions['level'],
  { pretty = process.stdout.isTTY === true, destination }: { pretty?: boolean; destination?: DestinationStream } = {},
): Logger {
  const options: LoggerOptions = { level, redact: { paths: REDACTED_PATHS, censor: '[redacted]' } };
  if (destination) return pino(options, destination);
  if (pretty) options.transport = { target: 'pino-pretty', options: { colorize: true } };
  return pino(options);
}
