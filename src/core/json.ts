/**
 * True for what `JSON.parse` gives for `{...}`: an object that is neither null nor an array. The
 * one check every reader of untrusted JSON (a body, a file, an upstream's answer) starts with.
 */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
