import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { ToolportError } from '../../core/errors.js';
import { isLoopback } from '../../infra/net.js';

// host[:port], where host is a name, an IPv4 address or a bracketed IPv6 address.
const HOST_HEADER = /^(\[[^\]]*\]|[^:[\]]+)(?::\d*)?$/;
const ORIGIN = /^https?:\/\/(\[[^\]]*\]|[^/:[\]]+)(?::\d{1,5})?$/i;
const LOOPBACK_ONLY = 'This server listens on loopback only';
const UNAUTHENTICATED = 'This server takes calls without an API key';
// Every request asks about the same one or two Host values, and the address check behind the
// answer allocates; remember answers, up to a bound a client cannot push memory past.
const SEEN_HOSTS_MAX = 256;

/** Which Host and Origin headers a server answers to; see `hostAndOriginGuard`. */
export interface HostPolicy {
  /** The server listens on a loopback address. */
  loopback: boolean;
  /** API keys are configured: every request but the probes must carry one. */
  authenticated: boolean;
  /** Host names (or IP addresses) answered to besides local ones, lower case, without port. */
  allowedHosts: readonly string[];
  /** Web origins (`scheme://host[:port]`, as `URL.origin` writes them) allowed besides local ones. */
  allowedOrigins: readonly string[];
}

/** A function of a string, with its answers remembered up to a bound. */
function remembered(answer: (value: string) => boolean): (value: string) => boolean {
  const seen = new Map<string, boolean>();
  return (value) => {
    let known = seen.get(value);
    if (known === undefined) {
      known = answer(value);
      if (seen.size < SEEN_HOSTS_MAX) seen.set(value, known);
    }
    return known;
  };
}

// The pattern admits IPv6 only in brackets: a bare "::1" is not a valid Host.
const hostName = (host: string): string | undefined => HOST_HEADER.exec(host)?.[1]?.toLowerCase();
const isLocalHost = remembered((host) => {
  const name = hostName(host);
  return name !== undefined && isLoopback(name);
});

/** True for a Host header naming this machine: localhost, 127.x.x.x or [::1], with an optional port. */
export function isLocalHostHeader(host: string | undefined): boolean {
  return host !== undefined && isLocalHost(host);
}

/** True for an origin served from this machine: http(s)://localhost|127.x.x.x|[::1][:port]. `null` is not. */
export function isLocalOrigin(origin: string): boolean {
  const name = ORIGIN.exec(origin)?.[1];
  return name !== undefined && isLoopback(name);
}

type Hook = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void;

/**
 * The guard against DNS rebinding and cross-site requests, as an onRequest hook; undefined when
 * the policy checks nothing. A web page the user visits can reach a server the user can reach:
 * through DNS rebinding (a hostile name that resolves to the server's address, so the browser
 * sends `Host: evil.example` and, on a POST, `Origin: http://evil.example`) or a plain cross-site
 * request (the browser sends the page's `Origin`). Where nothing else stops such a page, refusing
 * foreign Host and Origin headers does:
 *
 * - Origin: on loopback, or wherever no API keys are configured (a page cannot know a key), a
 *   present Origin must be local or in `allowedOrigins`. Browsers send Origin on every POST,
 *   cross-site or not, so no page can run a tool from a foreign origin. `Origin: null` is refused.
 * - Host: on loopback, or wherever `allowedHosts` is given, Host must be local or allowed. This
 *   closes rebinding for GETs too (which carry no Origin). It reads the Host header itself, never
 *   X-Forwarded-Host, which a page can set on a same-origin request.
 *
 * Health endpoints get no exemption: a probe that reaches the server sends a local or allowed Host,
 * and a probe that passes while every call is refused would hide the misconfiguration.
 *
 * Content types: a POST with a body of any type but application/json is already a 415, so the
 * "simple" bodies a cross-site form or `fetch` may send without a CORS preflight never reach a
 * tool. A POST with no body and no Content-Type stays valid ("no body = {}" in the REST contract):
 * the Origin check refuses it when it comes from a page.
 */
export function hostAndOriginGuard(policy: HostPolicy): Hook | undefined {
  const checkHost = policy.loopback || policy.allowedHosts.length > 0;
  const checkOrigin = policy.loopback || !policy.authenticated;
  if (!checkHost && !checkOrigin) return undefined;

  const allowedHosts = new Set(policy.allowedHosts);
  const allowedOrigins = new Set(policy.allowedOrigins);
  const hostAllowed =
    allowedHosts.size === 0
      ? isLocalHost
      : remembered((host) => {
          const name = hostName(host);
          return name !== undefined && (isLoopback(name) || allowedHosts.has(name));
        });
  const originAllowed = (origin: string): boolean => isLocalOrigin(origin) || allowedOrigins.has(origin.toLowerCase());
  const hostRefused = hostRefusal(policy);
  const originRefused = originRefusal(policy);

  return (request, _reply, done) => {
    const { host, origin } = request.headers;
    if (checkHost && (host === undefined || !hostAllowed(host))) return done(hostRefused(host));
    if (checkOrigin && origin !== undefined && !originAllowed(origin)) return done(originRefused(origin));
    done();
  };
}

function hostRefusal({ loopback, allowedHosts }: HostPolicy): (host: string | undefined) => ToolportError {
  const allowing = allowedHosts.length > 0;
  const names = allowing ? 'localhost, 127.0.0.1, [::1] or the names in TOOLPORT_ALLOWED_HOSTS' : 'localhost, 127.0.0.1 or [::1]';
  const why = loopback
    ? `${LOOPBACK_ONLY} and, to protect against DNS rebinding, answers only to ${names}.`
    : `To protect against DNS rebinding, this server answers only to ${names}.`;
  return (host) => {
    const what = host === undefined ? 'no Host header' : `the Host header ${JSON.stringify(host)}, which is not ${allowing ? 'local or allowed' : 'local'}`;
    return new ToolportError('FORBIDDEN', `Request refused: it has ${what}. ${why}`);
  };
}

function originRefusal({ loopback, allowedOrigins }: HostPolicy): (origin: string) => ToolportError {
  const allowing = allowedOrigins.length > 0;
  const why =
    `${loopback ? LOOPBACK_ONLY : UNAUTHENTICATED} and, to protect against DNS rebinding and cross-site requests, refuses calls from ` +
    (allowing ? 'pages of sites not in TOOLPORT_ALLOWED_ORIGINS or TOOLPORT_CORS_ORIGINS.' : 'pages of other sites.');
  return (origin) =>
    new ToolportError(
      'FORBIDDEN',
      `Request refused: it comes from the web origin ${JSON.stringify(origin)}, which is not ${allowing ? 'local or allowed' : 'local'}. ${why}`,
    );
}
