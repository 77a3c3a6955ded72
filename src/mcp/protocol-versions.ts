/**
 * The MCP protocol revisions served, and what differs between them for a tools-only server.
 *
 * Two eras: the legacy revisions open with an `initialize` handshake (served statelessly here:
 * any request works without one, so any replica can answer), and the modern revisions carry
 * their version and client capabilities in every request's `_meta` and have `server/discover`
 * instead of the handshake. Revision names are ISO dates, so string order is date order (the
 * SDK's era test, `version >= '2026-07-28'`, relies on the same).
 */

/** The first revision of the stateless era. */
const FIRST_MODERN_VERSION = '2026-07-28';

/** Modern revisions served, newest first; `server/discover` lists exactly these. */
export const MODERN_VERSIONS: readonly string[] = [FIRST_MODERN_VERSION];

/** Revisions served through `initialize`, newest first. */
export const LEGACY_VERSIONS: readonly string[] = ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'];

/** What `initialize` answers when the client asks for a revision not served: the newest legacy one. */
const LATEST_LEGACY_VERSION = '2025-11-25';

/**
 * The revision a legacy request without any version is taken to speak: Streamable HTTP clients of
 * 2025-03-26 send no `MCP-Protocol-Version` header, and the spec lets a server assume that one.
 */
export const DEFAULT_LEGACY_VERSION = '2025-03-26';

/** Whether a revision belongs to the stateless era (including modern revisions not served). */
export function isModernVersion(version: string): boolean {
  return version >= FIRST_MODERN_VERSION;
}

export function isServedModern(version: string): boolean {
  return MODERN_VERSIONS.includes(version);
}

export function isServedLegacy(version: string): boolean {
  return LEGACY_VERSIONS.includes(version);
}

/**
 * The revision `initialize` answers with: the one asked for when it is served, else the newest
 * legacy revision (the spec's rule; the client then decides whether it can go on).
 */
export function negotiateLegacyVersion(requested: string): string {
  return isServedLegacy(requested) ? requested : LATEST_LEGACY_VERSION;
}

/**
 * Only 2025-03-26 (and 2024-11-05 before it) allowed JSON-RPC batches; 2025-06-18 removed them and
 * the stateless revisions take one message per request.
 */
export function allowsBatches(version: string): boolean {
  return version <= '2025-03-26';
}

/**
 * Up to 2025-06-18 the tools page lists invalid arguments among the protocol errors (-32602);
 * from 2025-11-25 on, input validation errors are tool execution errors (`isError: true`) so the
 * model can correct itself.
 */
export function inputErrorsAreToolResults(version: string): boolean {
  return version >= '2025-11-25';
}

/** Tool `annotations` arrived in 2025-03-26; top-level `title` and `outputSchema` in 2025-06-18. */
export function toolFieldsOf(version: string): { annotations: boolean; titleAndOutput: boolean } {
  return { annotations: version >= '2025-03-26', titleAndOutput: version >= '2025-06-18' };
}

/**
 * Whether an error that cannot name its request leaves `id` out (2025-11-25 and later, whose
 * schemas make it optional) rather than sending `"id": null`, as JSON-RPC 2.0 and the earlier
 * revisions have it. An unknown revision gets JSON-RPC's null.
 */
export function omitsUnknownErrorId(version: string): boolean {
  return version === LATEST_LEGACY_VERSION || MODERN_VERSIONS.includes(version);
}

/**
 * The tasks utility of 2025-11-25 (`params.task`, `tasks/get`, `tasks/result`, `tasks/list`,
 * `tasks/cancel`, `execution.taskSupport`): that revision only. 2026-07-28 moved tasks to an
 * extension (`io.modelcontextprotocol/tasks`) of another shape.
 */
export function hasTaskUtility(version: string): boolean {
  return version === LATEST_LEGACY_VERSION;
}
