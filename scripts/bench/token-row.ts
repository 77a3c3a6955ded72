import { startTestIssuer, type TestIssuer } from '../../test/support/oidc-provider.js';
import { HIGH_RATE_LIMIT, type ThroughputRow } from './rows.js';

// The resource toolport is told it is; only the token's audience must match it, not the port it listens on.
const RESOURCE = 'http://127.0.0.1/bench';
const JSON_HEADERS = { 'content-type': 'application/json' };

/** The token row and what it needs: toolport's OAuth variables, and the issuer to stop at the end. */
export interface TokenRow {
  /** `POST /tools/Echo` with an access token: the same request as `echo-keyed`, a JWT in place of the key. */
  row: ThroughputRow;
  issuer: TestIssuer;
}

/** The row's id and label, for --only, before the issuer it needs is started. */
export const TOKEN_ROW = { id: 'echo-token', label: 'POST /tools/Echo, OAuth access token, audit line, metrics, rate limit' };

/**
 * Starts a real authorization server (oidc-provider, as the tests use) and gets one access token
 * for toolport through client credentials. The token is verified on its first request and then
 * remembered until it expires, so the row measures what every later request costs: it must cost
 * no more than the key of `echo-keyed` (issue 21).
 */
export async function startTokenRow(): Promise<TokenRow> {
  const issuer = await startTestIssuer();
  const token = await issuer.clientCredentials({ resource: RESOURCE, scope: 'tools:Echo' });
  return {
    row: {
      ...TOKEN_ROW,
      request: { method: 'POST', path: '/tools/Echo', headers: { ...JSON_HEADERS, authorization: `Bearer ${token}` }, body: '{"text":"hello"}' },
      keyed: false,
      rateLimit: HIGH_RATE_LIMIT,
      // A token costs no more than a key: measured against toolport taking the very same bearer value
      // as a static key, so both servers parse the same request and only the check differs.
      goal: { text: '0.95x, as a key', bound: 'at least', ratio: 0.95 },
      env: () => ({ TOOLPORT_OAUTH_ISSUER: issuer.issuer, TOOLPORT_PUBLIC_URL: RESOURCE }),
      baseline: { name: 'toolport, the same bearer value as a static key', env: () => ({ TOOLPORT_API_KEYS: token }) },
    },
    issuer,
  };
}
