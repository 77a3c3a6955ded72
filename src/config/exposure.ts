import { isLoopback } from '../infra/net.js';
import type { KeySpec } from '../auth/keyring.js';
import type { Config } from './config.js';
import type { ToolDef } from '../core/types.js';

/** Raised at start-up when the service would hand tools that change things to anyone on the network. */
export class UnsafeExposureError extends Error {
  override readonly name = 'UnsafeExposureError';
}

export interface ExposureOptions extends Pick<Config, 'host' | 'allowUnauthenticated'> {
  /** The keys loaded by `loadApiKeys`; any key means every request is authenticated. */
  apiKeys: readonly KeySpec[];
}

/**
 * Safe by default: refuses (throws `UnsafeExposureError`) to serve a tool that is not marked
 * read-only (`annotations.readOnlyHint !== true`) on a non-loopback address without API keys,
 * unless `TOOLPORT_ALLOW_UNAUTHENTICATED` says the network is trusted. The message names the tools,
 * the host and the three ways out. Returns the tools served that way when the override allowed it,
 * so the caller can warn; otherwise an empty list.
 */
export function assertSafeExposure({ host, apiKeys, allowUnauthenticated }: ExposureOptions, tools: readonly ToolDef[]): string[] {
  if (apiKeys.length > 0 || isLoopback(host)) return [];
  const unsafe = tools.filter((t) => t.annotations?.readOnlyHint !== true).map((t) => t.name);
  if (unsafe.length === 0 || allowUnauthenticated) return unsafe;
  const readOnly = tools.filter((t) => t.annotations?.readOnlyHint === true).map((t) => t.name);
  throw new UnsafeExposureError(
    `Refusing to serve ${unsafe.join(', ')} without authentication on ${host}, which is not a loopback address: ` +
      `${unsafe.length === 1 ? 'this tool is' : 'these tools are'} not read-only, and anyone who can reach the port could run ${unsafe.length === 1 ? 'it' : 'them'}. ` +
      'Either set TOOLPORT_API_KEYS (or TOOLPORT_API_KEYS_FILE) to require an API key, ' +
      `narrow TOOLPORT_TOOLS to read-only tools${readOnly.length > 0 ? ` (here: ${readOnly.join(', ')})` : ''}${unsafe.some((name) => name.endsWith('*')) ? " and serve no upstreams (an upstream's tools never count as read-only, whatever they claim)" : ''}, ` +
      'or set TOOLPORT_ALLOW_UNAUTHENTICATED=true if only trusted clients can reach this address.',
  );
}
