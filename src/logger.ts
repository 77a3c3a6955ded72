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
  if (pretty) {
    options.transport = { target: 'pino-pretty', options: { colorize: true } };
    return pino(options);
  }
  return pino(options, logDestination());
}

// What may wait for a slow or failing destination; past it, new lines are dropped.
const MAX_BUFFERED_BYTES = 16 * 1024 * 1024;

/**
 * A file descriptor (standard output by default) as a log destination whose failures cannot end
 * the process. pino's own destination swallows EPIPE (the reader went away) and re-emits any other
 * write error (ENOSPC, EIO...) as an 'error' event, which with no listener throws. Here a line that
 * cannot be written is lost, the next line tries again, and what waits meanwhile is bounded.
 */
export function logDestination(fd = 1): ReturnType<typeof pino.destination> {
  const stream = pino.destination({ dest: fd, sync: false, maxLength: MAX_BUFFERED_BYTES });
  stream.on('error', () => {});
  return stream;
}
