import { BlockList, isIP } from 'node:net';

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

/**
 * True for a host only this machine can reach: `localhost`, 127.0.0.0/8, `::1` (bare or as
 * `[::1]`, or IPv4-mapped `::ffff:127.x.x.x`). `0.0.0.0`, `::` and every other name or address are not.
 */
export function isLoopback(host: string): boolean {
  const bracketed = host.startsWith('[') && host.endsWith(']');
  const name = bracketed ? host.slice(1, -1) : host;
  if (!bracketed && name.toLowerCase() === 'localhost') return true;
  const family = isIP(name);
  if (family === 4 && !bracketed) return LOOPBACK.check(name, 'ipv4');
  if (family === 6) return LOOPBACK.check(name, 'ipv6');
  return false;
}

/** A URL with its password replaced by `***`, fit for logs and messages (text that is no URL is hidden whole when it may hold one). */
export function redactedUrl(value: string): string {
  try {
    const url = new URL(value);
    if (url.password === '') return value;
    url.password = '***';
    return url.href;
  } catch {
    return value.includes('@') ? '(hidden)' : value;
  }
}
