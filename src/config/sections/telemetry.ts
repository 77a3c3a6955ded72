import { oneOfSetting } from '../variables.js';
import { TRACING } from './traces.js';

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** What the service tells about itself: its logs and, when an exporter is configured, its traces. */
export const TELEMETRY = {
  logLevel: oneOfSetting({
    name: 'LOG_LEVEL',
    values: LOG_LEVELS,
    fallback: 'info',
    meaning: '`fatal`, `error`, `warn`, `info`, `debug`, `trace` or `silent`',
  }),
  tracing: TRACING,
} as const;
