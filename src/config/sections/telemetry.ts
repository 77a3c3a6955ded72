import { oneOfSetting } from '../variables.js';

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** What the service tells about itself: its logs (traces and their exporters will join them here). */
export const TELEMETRY = {
  logLevel: oneOfSetting({
    name: 'LOG_LEVEL',
    values: LOG_LEVELS,
    fallback: 'info',
    meaning: '`fatal`, `error`, `warn`, `info`, `debug`, `trace` or `silent`',
  }),
} as const;
