import type { FastifyRequest } from 'fastify';
import { ToolportError } from '../core/errors.js';
import { isLoopback } from '../safety.js';

// host[:port], where host is a name, an IPv4 address or a bracketed IPv6 address.
const HOST_HEADER = /^(\[[^\]]*\]|[^:[\]]+)(?::\d*)?$/;
const ORIGIN = /^https?:\/\/(\[[^\]]*\]|[^/:[\]]+)(?::\d{1,5})?$/i;
const LOOPBACK_ONLY = 'This server listens on loopback only';

/** True for a Host header naming this machine: localhost, 127.x.x.x or [::1], with an optional port. */
export function isLocalHostHeader(host: string | undefined): boolean {
  if (host === undefined) return false;
  let local = seenHosts.get(host);
  if (local === undefined) {
    // The pattern admits IPv6 only in brackets: a bare "::1" is not a valid Host.
    const name = HOST_HEADER.exec(host)?.[1];
    local = name !== undefined && isLoopback(name);
    if (seenHosts.size < SEEN_HOSTS_MAX) seenHosts.set(host, local);
  }
  return local;
}

// Every request asks about the same one or two Host values, and the address check behind the
// answer allocates; remember answers, up to a bound a client cannot push memory past.
const SEEN_HOSTS_MAX = 256;
const seenHosts = new Map<string, boolean>();

/** True for an origin served from this machine: http(s)://localhost|127.x.x.x|[::1][:port]. `null` is not. */
export function isLocalOrigin(origin: string): boolean {
  const name = ORIGIN.exec(origin)?.[1];
  return name !== undefined && isLoopback(name);
}

/**
 * The loopback guard, for a server listening on a loopback address. A web page the user visits can
 * still reach such a server: through DNS rebinding (a hostile name that resolves to 127.0.0.1, so
 * the browser sends `Host: evil.example`) or a plain cross-site request (the browser sends the
 * page's `Origin`). Refusing non-local Host and Origin headers shuts both doors. Health endpoints
 * get no exemption: anything that can reach a loopback listener sends a local Host, and a probe
 * that passes while every call is refused would hide the misconfiguration.
 *
 * Content types: a POST with a body of any type but application/json is already a 415, so the
 * "simple" bodies a cross-site form or `fetch` may send without a CORS preflight never reach a
 * tool. A POST with no body and no Content-Type stays valid ("no body = {}" in the REST contract):
 * browsers always send `Origin` on cross-origin POSTs, so the Origin check refuses that case here.
 */
export async function refuseNonLocal(request: FastifyRequest): Promise<void> {
  const { host, origin } = request.headers;
  if (!isLocalHostHeader(host)) {
    const what = host === undefined ? 'no Host header' : `the Host header ${JSON.stringify(host)}, which is not local`;
    throw new ToolportError(
      'FORBIDDEN',
      `Request refused: it has ${what}. ${LOOPBACK_ONLY} and, to protect against DNS rebinding, answers only to localhost, 127.0.0.1 or [::1].`,
    );
  }
  if (origin !== undefined && !isLocalOrigin(origin)) {
    throw new ToolportError(
      'FORBIDDEN',
      `Request refused: it comes from the web origin ${JSON.stringify(origin)}, which is not local. ${LOOPBACK_ONLY} and, to protect against DNS rebinding and cross-site requests, refuses calls from pages of other sites.`,
    );
  }
}
