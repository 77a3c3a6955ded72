import type { ToolDef } from '../core/types.js';
import type { UpstreamSpec } from './config.js';

/**
 * Each upstream as one tool-like entry named by its namespace (`github__*`, or `github:*` for an
 * upstream without a prefix): what a key's `tools` may name before the upstream lists its tools,
 * and what the exposure check weighs. No annotation is carried: an upstream's `readOnlyHint` is
 * its own claim, so its tools never count as read-only for serving without keys.
 */
export function upstreamExposure(specs: readonly UpstreamSpec[]): ToolDef[] {
  return specs.map((spec) => ({
    name: spec.prefix === '' ? `${spec.name}:*` : `${spec.prefix}${spec.separator}*`,
    description: `the tools of upstream ${spec.name}`,
    inputSchema: { type: 'object' },
    execute: () => {
      throw new Error('not a tool');
    },
  }));
}
