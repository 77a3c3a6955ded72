import { isIP } from 'node:net';
import { redactedUrl } from '../infra/net.js';

// How each kind of value is read from the environment, and the error that names a bad one.

/** The environment configuration is read from. */
export type Env = Record<string, string | undefined>;

/** Raised for a missing or malformed variable; the message names it and says what is expected. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  readonly variable: string;

  constructor(variable: string, expected: string, got: string, message = `Invalid ${variable}: expected ${expected}, got ${JSON.stringify(got)}`) {
    super(message);
    this.variable = variable;
  }
}

export const ISSUER_EXPECTED = 'absolute https URLs (http only on a loopback host) without query, fragment or credentials';
export const URL_EXPECTED = 'an absolute https URL (http only on a loopback host) without query, fragment or credentials';

/**
 * An absolute URL a server is known by, without a trailing slash, or undefined: https, or http on
 * a loopback host (a token sent in the clear elsewhere could be read on the way); no query,
 * fragment or credentials.
 */
export function serverUrl(item: string): string | undefined {
  let url: URL;
  try {
    url = new URL(item);
  } catch {
    return undefined;
  }
  const loopback = url.hostname === 'localhost' || url.hostname === '[::1]' || url.hostname.startsWith('127.');
  const secure = url.protocol === 'https:' || (url.protocol === 'http:' && loopback);
  if (!secure || url.search !== '' || url.hash !== '' || url.username !== '' || url.password !== '' || !/^https?:\/\//i.test(item)) return undefined;
  return url.href.replace(/\/$/, '');
}

export function raw(env: Env, name: string): string | undefined {
  const value = env[name]?.trim();
  return value === '' ? undefined : value;
}

export function text(env: Env, name: string, fallback: string): string {
  return raw(env, name) ?? fallback;
}

export function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const value = raw(env, name);
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < min || n > max) throw new ConfigError(name, `an integer from ${min} to ${max}`, value);
  return n;
}

/** Bytes, as a count or with a binary suffix: `1048576`, `512K`, `512M`, `10G`, `1T`; `0` is allowed. */
export function byteSize(env: Env, name: string, fallback: number): number {
  const value = raw(env, name);
  if (value === undefined) return fallback;
  const match = /^(\d{1,15})([kmgt])?$/i.exec(value);
  const power = match?.[2] === undefined ? 0 : 'kmgt'.indexOf(match[2].toLowerCase()) + 1;
  const n = match === null ? NaN : Number(match[1]) * 1024 ** power;
  if (!Number.isSafeInteger(n))
    throw new ConfigError(name, 'a size in bytes, optionally with K, M, G or T (powers of 1024), such as 10G; 0 for no quota', value);
  return n;
}

export function boolean(env: Env, name: string, fallback: boolean): boolean {
  const value = raw(env, name)?.toLowerCase();
  if (value === undefined) return fallback;
  if (['true', '1', 'yes'].includes(value)) return true;
  if (['false', '0', 'no'].includes(value)) return false;
  throw new ConfigError(name, 'true or false', value);
}

export function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T {
  const value = raw(env, name);
  if (value === undefined) return fallback;
  if (!(allowed as readonly string[]).includes(value)) throw new ConfigError(name, `one of ${allowed.join(', ')}`, value);
  return value as T;
}

export function list(env: Env, name: string, { secret = false } = {}): string[] | undefined {
  const value = raw(env, name);
  if (value === undefined) return undefined;
  const items = value.split(',').map((s) => s.trim());
  // A secret's value never goes into an error message (it would end up in logs).
  if (items.some((s) => s === '')) throw new ConfigError(name, 'a comma-separated list without empty items', secret ? '(hidden)' : value);
  return items;
}

export function optionalInteger(env: Env, name: string, min: number, max: number): number | undefined {
  return raw(env, name) === undefined ? undefined : integer(env, name, 0, min, max);
}

/** A list whose every item `check` accepts (returning it normalised); the error names the first bad item. */
export function checkedList(env: Env, name: string, check: (item: string) => string | undefined, expected: string): string[] {
  return (list(env, name) ?? []).map((item) => {
    const normalised = check(item);
    if (normalised === undefined) throw new ConfigError(name, `a comma-separated list of ${expected}`, item);
    return normalised;
  });
}

// A DNS name (labels of letters, digits and inner hyphens or underscores), which covers IPv4 too.
const DNS_NAME = /^(?=.{1,253}$)[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)*$/i;

/** A Host header's name part, lower case: a DNS name, an IPv4 address or a bracketed IPv6 address. */
export function hostName(item: string): string | undefined {
  const bracketed = /^\[(.*)\]$/.exec(item)?.[1];
  if (bracketed !== undefined) return isIP(bracketed) === 6 ? item.toLowerCase() : undefined;
  return DNS_NAME.test(item) ? item.toLowerCase() : undefined;
}

/** An http(s) origin as browsers send it (`URL.origin`: lower case, default port left out), or undefined. */
export function webOrigin(item: string): string | undefined {
  let url: URL;
  try {
    url = new URL(item);
  } catch {
    return undefined;
  }
  const bare = url.pathname === '/' && url.search === '' && url.hash === '' && url.username === '' && url.password === '';
  // The host must be a name or an address: `https://*.example.com` parses, but no browser sends it.
  return (url.protocol === 'http:' || url.protocol === 'https:') && bare && hostName(url.hostname) !== undefined ? url.origin : undefined;
}

/**
 * Exact web origins, never `*`. The origins listed also pass the Origin check (see
 * src/http/guards/local-only.ts), so a wildcard would let every page the user opens call: with keys,
 * with any key it was given; without keys, where that check is all that stops a page, anyone.
 */
export function corsOrigins(env: Env, name: string, keyed: boolean): string[] {
  if (list(env, name)?.includes('*')) {
    const why = keyed
      ? 'with API keys configured, * would let any web page send calls with a key'
      : 'without API keys, * would let any web page the user opens run the tools';
    throw new ConfigError(name, `exact web origins such as https://app.example.com, not a wildcard: ${why}`, raw(env, name) ?? '');
  }
  return checkedList(env, name, webOrigin, 'exact web origins such as https://app.example.com (http or https, a host, an optional port, no path)');
}

/**
 * A Redis URL as ioredis takes it: `redis://` (or `rediss://`, TLS), a host, an optional port,
 * user and password, and an optional database number as the path. The password never goes into
 * an error message.
 */
export function redisUrl(env: Env, name: string): string | undefined {
  const value = raw(env, name);
  if (value === undefined) return undefined;
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    url = undefined;
  }
  const valid =
    url !== undefined &&
    (url.protocol === 'redis:' || url.protocol === 'rediss:') &&
    url.hostname !== '' &&
    /^\/?(\d+)?$/.test(url.pathname) &&
    url.search === '' &&
    url.hash === '';
  if (!valid)
    throw new ConfigError(
      name,
      'a URL such as redis://redis:6379 or rediss://:password@redis.example:6380/2 (a database number as the path)',
      redactedUrl(value),
    );
  return value;
}

const PROXY_RANGES = new Set(['loopback', 'linklocal', 'uniquelocal']);
const HOP_COUNT = /^\d{1,3}$/;

/**
 * `true`, `false`, a hop count (how many proxies in front to believe), or a comma-separated list of
 * the proxies' addresses and CIDR ranges (and the names `loopback`, `linklocal`, `uniquelocal`).
 */
export function trustProxy(env: Env, name: string): boolean | number | string[] {
  const value = raw(env, name);
  if (value === undefined) return false;
  const word = value.toLowerCase();
  if (word === 'true' || word === 'false') return word === 'true';
  if (HOP_COUNT.test(value)) return Number(value);
  const items = value.split(',').map((s) => s.trim());
  if (items.every((item) => PROXY_RANGES.has(item) || isAddressRange(item))) return items;
  throw new ConfigError(name, 'true, false, a hop count, or a comma-separated list of IP addresses and CIDR ranges', value);
}

function isAddressRange(item: string): boolean {
  const [address = '', prefix, ...rest] = item.split('/');
  const family = isIP(address);
  if (family === 0 || rest.length > 0) return false;
  return prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128));
}
