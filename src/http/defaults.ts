// Defaults shared by the configuration (src/config/config.ts) and the adapters that take the same values
// as options. This module imports nothing, so config.ts need not import an adapter to learn them.

/** Largest request body in bytes, unless TOOLPORT_BODY_LIMIT says otherwise. */
export const DEFAULT_BODY_LIMIT = 1024 * 1024;

/** Time for a request's headers to arrive, in ms. */
export const DEFAULT_HEADERS_TIMEOUT_MS = 10_000;
/** Time for a whole request, body included, to arrive, in ms. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;
/** Longer than the 60 s idle timeout of common load balancers, which must close first (else a 502). */
export const DEFAULT_KEEP_ALIVE_TIMEOUT_MS = 72_000;
/** How long a connection may see no traffic while none of its calls runs, in ms. */
export const DEFAULT_IDLE_TIMEOUT_MS = 30_000;
