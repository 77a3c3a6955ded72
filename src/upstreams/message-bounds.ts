const KiB = 1024;
const MiB = 1024 * KiB;

/** Largest message toolport reads from an upstream (a stdio line, an HTTP body, an SSE event), whatever it awaits; past it the upstream is broken. */
export const MAX_MESSAGE_BYTES = 32 * MiB;

/** Most bytes of one tool listing, all its pages together: each page may take what the pages before it left. */
export const LIST_BUDGET_BYTES = 16 * MiB;

/**
 * Most bytes of a message that is not the answer to a call or a listing: a notification (progress,
 * `list_changed`), a request of the upstream's, the answer to `initialize`. Such messages are a few
 * hundred bytes; this leaves room for long instructions and log messages.
 */
export const SMALL_MESSAGE_BYTES = 1 * MiB;

/**
 * Default of an upstream's `maxResultBytes`, the most one call's answer may take: a 1M-token
 * context holds about 4 MiB of text, and the largest image model APIs take (5 MB) is about 6.7 MB
 * as base64; more could not reach a model whole, and 8 calls in flight (the default
 * `maxConcurrency`) then hold 64 MiB at most.
 */
export const DEFAULT_MAX_RESULT_BYTES = 8 * MiB;

/** `bytes` for people, exact: `8 MiB`, `64 KiB`, `1000 bytes`. */
export function bytesText(bytes: number): string {
  if (bytes >= MiB && bytes % MiB === 0) return `${bytes / MiB} MiB`;
  if (bytes >= KiB && bytes % KiB === 0) return `${bytes / KiB} KiB`;
  return `${bytes} bytes`;
}
