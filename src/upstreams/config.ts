import { open } from 'node:fs/promises';
import path from 'node:path';
import { DEFAULT_MAX_RESULT_BYTES, MAX_MESSAGE_BYTES } from './message-bounds.js';
import { isRecord } from '../core/json.js';

/** A bad upstreams file or entry, found at start-up. The message names the upstream and the field, never a secret's value. */
export class UpstreamConfigError extends Error {
  override readonly name = 'UpstreamConfigError';
}

/** What every upstream has, whatever its transport. */
export interface UpstreamCommon {
  /** The key in `mcpServers`. */
  name: string;
  /** Put before each of its tools' names; '' for none (and then no separator either). Default: the name. */
  prefix: string;
  /** Between the prefix and the tool's own name. Default `__`. */
  separator: string;
  /** `lazy`: started on first use (stdio only; an HTTP upstream is always listed at start-up). */
  startup: 'eager' | 'lazy';
  /** Deadline of a call to one of its tools; undefined: the server's default. */
  timeoutMs: number | undefined;
  /** Calls in flight to this upstream at once. */
  maxConcurrency: number;
  /** The most bytes one call's answer may take; a larger answer fails that call, unread. */
  maxResultBytes: number;
  /** Which of its tools to serve, by the upstream's own tool names: `include` first, then `exclude`. */
  tools: { include?: string[]; exclude?: string[] } | undefined;
  /** Values that came from `${VAR}` references anywhere in the entry: taken for secrets by {@link secretValues}. */
  variableValues: string[];
}

export interface StdioUpstream extends UpstreamCommon {
  transport: 'stdio';
  command: string;
  args: string[];
  /** The whole environment it gets besides PATH and HOME. */
  env: Record<string, string>;
  cwd: string | undefined;
  /** It may open sockets (default true); false refuses them under the sandbox, and refuses to run it without one. */
  network: boolean;
}

export interface HttpUpstream extends UpstreamCommon {
  transport: 'http';
  /** A Streamable HTTP endpoint, http: or https:. */
  url: string;
  headers: Record<string, string>;
}

export type UpstreamSpec = StdioUpstream | HttpUpstream;

/** Largest upstreams file read: a config is a few KiB; this only stops a wrong path (a log, a disk image) being read whole. */
export const MAX_UPSTREAMS_FILE_BYTES = 1024 * 1024;
/** Most upstreams one server runs: each is a process or a connection pool, and a status line in /readyz. */
export const MAX_UPSTREAMS = 64;
export const DEFAULT_SEPARATOR = '__';
export const DEFAULT_UPSTREAM_CONCURRENCY = 8;
const MAX_UPSTREAM_CONCURRENCY = 1024;
// An answer smaller than this could not carry a useful result; toolport reads no message past MAX_MESSAGE_BYTES.
const MIN_RESULT_BYTES = 1024;
// An hour, as for the server's own deadlines: Node's timers take at most 2^31 - 1 ms.
const MAX_TIMEOUT_MS = 3_600_000;
// A tool name is at most 64 characters, and at least one of them is the upstream's own.
const MAX_NAMESPACE_CHARS = 63;
const NAME_PART = /^[a-zA-Z0-9_-]*$/;
// Claude Code's syntax: ${NAME} or ${NAME:-default}; anything else with a $ stays as written.
const VARIABLE = /\$\{([^}:-]+)(?::-([^}]*))?\}/g;
// RFC 9110 token: what a header name may be.
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
// Shorter values are not credentials worth the name, and redacting them would blank common words and numbers out of every log line.
const MIN_SECRET_CHARS = 8;

const SERVER_KEYS = [
  'type',
  'command',
  'args',
  'env',
  'cwd',
  'url',
  'headers',
  'disabled',
  'prefix',
  'separator',
  'startup',
  'timeoutMs',
  'maxConcurrency',
  'maxResultBytes',
  'tools',
  'network',
] as const;
const STDIO_ONLY = ['args', 'env', 'cwd', 'network'] as const;

type Json = Record<string, unknown>;

/**
 * The upstreams an `mcpServers` file names, in the file's order, disabled ones left out. The file
 * is the shape Claude Desktop, Claude Code and Cursor use; other top-level keys are ignored.
 * `${VAR}` and `${VAR:-default}` in command, args, env values, cwd, url and header values come
 * from `env`. Throws `UpstreamConfigError` at the first problem; `source` names the file in messages.
 */
export function parseUpstreams(text: string, env: Record<string, string | undefined>, source = 'the upstreams file'): UpstreamSpec[] {
  const Source = source.charAt(0).toUpperCase() + source.slice(1);
  if (Buffer.byteLength(text) > MAX_UPSTREAMS_FILE_BYTES) throw new UpstreamConfigError(`${Source} is larger than 1 MiB.`);
  let data: unknown;
  try {
    data = JSON.parse(text.replace(/^\uFEFF/, ''));
  } catch (err) {
    // Newer V8 messages quote the text around the error, which may be a secret: say only where it is.
    throw new UpstreamConfigError(`${Source} is not valid JSON${jsonErrorLocation(text, (err as Error).message)}.`);
  }
  if (!isRecord(data)) throw new UpstreamConfigError(`${Source} must hold a JSON object with an "mcpServers" object.`);
  const servers = data['mcpServers'];
  if (servers === undefined) throw new UpstreamConfigError(`${Source} has no "mcpServers" object.`);
  if (!isRecord(servers)) throw new UpstreamConfigError(`${Source}: "mcpServers" must be an object of servers by name.`);

  const specs: UpstreamSpec[] = [];
  for (const [name, entry] of Object.entries(servers)) {
    if (name === '') throw new UpstreamConfigError(`${Source}: a server in "mcpServers" has an empty name.`);
    if (isRecord(entry) && entry['disabled'] === true) continue;
    specs.push(parseServer(name, entry, env));
  }
  if (specs.length > MAX_UPSTREAMS) throw new UpstreamConfigError(`${Source} names ${specs.length} servers; at most ${MAX_UPSTREAMS} are supported.`);
  specs.forEach((spec, i) => {
    for (const other of specs.slice(0, i)) {
      const overlap = namespaceOverlap(other, spec);
      if (overlap !== undefined) throw new UpstreamConfigError(overlap);
    }
  });
  return specs;
}

/**
 * Why `a` and `b` (in the file's order) cannot both be served, or undefined when they can. With
 * namespace = prefix + separator, one namespace that begins the other lets one upstream list names
 * in the other's (`misc` without a prefix listing `github__delete_repo`, `gh` with separator `_`
 * listing `gh_admin__wipe`): the name would go to whichever listed first, and a key scoped to
 * `github__*` would reach the other upstream's tools.
 */
function namespaceOverlap(a: UpstreamCommon, b: UpstreamCommon): string | undefined {
  const [first, second] = [JSON.stringify(a.name), JSON.stringify(b.name)];
  const [spaceA, spaceB] = [a.prefix + a.separator, b.prefix + b.separator];
  const [shorter, longer] = spaceA.length <= spaceB.length ? [a, b] : [b, a];
  const [inner, outer] = [shorter.prefix + shorter.separator, longer.prefix + longer.separator];
  if (!outer.startsWith(inner)) return undefined;
  if (a.prefix === b.prefix && a.prefix !== '') return `Upstreams ${first} and ${second} both use the prefix "${a.prefix}"; give one of them another "prefix".`;
  if (inner === '') {
    const bare = a.prefix === '' ? first : second;
    return (
      `Upstreams ${first} and ${second} overlap: ${bare} has "prefix": "", so any of its tools may take a name that belongs to the other; ` +
      `an upstream without a prefix must be the only one, so give ${bare} a "prefix".`
    );
  }
  return (
    `Upstreams ${first} and ${second} overlap: every tool name of ${JSON.stringify(longer.name)} ("${outer}…") begins with "${inner}", ` +
    `the namespace of ${JSON.stringify(shorter.name)} (prefix "${shorter.prefix}" and separator "${shorter.separator}"), so either could list the other's names; ` +
    `change the "prefix" or "separator" of one so that neither namespace begins the other.`
  );
}

/**
 * Reads `file` (resolved against `cwd`) and parses it with {@link parseUpstreams}. A file that
 * is missing, unreadable, not a regular file or over 1 MiB is an `UpstreamConfigError` naming it.
 */
export async function loadUpstreams(file: string, env: Record<string, string | undefined>, cwd = process.cwd()): Promise<UpstreamSpec[]> {
  const resolved = path.resolve(cwd, file);
  const source = `the upstreams file ${JSON.stringify(resolved)}`;
  const cannot = (why: string): never => {
    throw new UpstreamConfigError(`Cannot read ${source}: ${why}.`);
  };
  let text = '';
  try {
    const handle = await open(resolved, 'r');
    try {
      const stats = await handle.stat();
      if (stats.isDirectory()) cannot('it is a directory');
      if (!stats.isFile()) cannot('it is not a regular file');
      if (stats.size > MAX_UPSTREAMS_FILE_BYTES) cannot('it is larger than 1 MiB');
      text = await handle.readFile('utf8');
    } finally {
      await handle.close();
    }
  } catch (err) {
    if (err instanceof UpstreamConfigError) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    cannot(code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : code === 'EISDIR' ? 'it is a directory' : String(code));
  }
  return parseUpstreams(text, env, source);
}

/**
 * The values in `specs` a log line, error body or metric must never show: every env value and
 * header value, the password of a URL, and whatever a `${VAR}` put anywhere. Longest first (so a
 * redactor replacing them in turn never leaves half of one), without duplicates, and without
 * values under 8 characters.
 */
export function secretValues(specs: readonly UpstreamSpec[]): string[] {
  const found = new Set<string>();
  for (const spec of specs) {
    const values = spec.transport === 'stdio' ? Object.values(spec.env) : [...Object.values(spec.headers), ...passwordsOf(spec.url)];
    for (const value of [...values, ...spec.variableValues]) if (value.length >= MIN_SECRET_CHARS) found.add(value);
  }
  return [...found].sort((a, b) => b.length - a.length || (a < b ? -1 : a > b ? 1 : 0));
}

function parseServer(name: string, entry: unknown, env: Record<string, string | undefined>): UpstreamSpec {
  const fail = (problem: string): never => {
    throw new UpstreamConfigError(`Upstream ${JSON.stringify(name)}: ${problem}.`);
  };
  if (!isRecord(entry)) fail('the entry must be an object');
  const server = entry as Json;
  const unknown = Object.keys(server).find((key) => !(SERVER_KEYS as readonly string[]).includes(key));
  if (unknown !== undefined) fail(`unknown key ${JSON.stringify(unknown)} (accepted: ${SERVER_KEYS.join(', ')})`);
  if (server['disabled'] !== undefined && typeof server['disabled'] !== 'boolean') fail('"disabled" must be true or false');

  const transport = transportOf(server, fail);
  const variableValues: string[] = [];
  const expand = (field: string, value: string): string => expandVariables(value, env, field, variableValues, fail);
  const common = commonOf(name, server, transport, fail);

  if (transport === 'stdio') {
    const command = server['command'];
    if (typeof command !== 'string' || command === '') fail('"command" must be a non-empty string');
    const args = server['args'] ?? [];
    if (!Array.isArray(args) || !args.every((a) => typeof a === 'string')) fail('"args" must be an array of strings');
    const cwd = server['cwd'];
    if (cwd !== undefined && (typeof cwd !== 'string' || cwd === '')) fail('"cwd" must be a non-empty string');
    const network = server['network'] ?? true;
    if (typeof network !== 'boolean') fail('"network" must be true or false');
    const spec: StdioUpstream = {
      ...common,
      variableValues,
      transport,
      command: noNul('"command"', expand('"command"', command as string), fail),
      args: (args as string[]).map((arg, i) => noNul(`args[${i}]`, expand(`args[${i}]`, arg), fail)),
      env: stringMap(server, 'env', 'a variable name (non-empty, without "=" or NUL)', (key) => key !== '' && !/[=\0]/.test(key), expand, fail),
      cwd: typeof cwd === 'string' ? noNul('"cwd"', expand('"cwd"', cwd), fail) : undefined,
      network: network as boolean,
    };
    return spec;
  }
  const url = server['url'];
  if (typeof url !== 'string' || url === '') fail('"url" must be a non-empty string');
  const spec: HttpUpstream = {
    ...common,
    variableValues,
    transport,
    url: checkedUrl(expand('"url"', url as string), fail),
    headers: stringMap(server, 'headers', 'a header name', (key) => HEADER_NAME.test(key), expand, fail),
  };
  for (const [key, value] of Object.entries(spec.headers)) if (/[\r\n\0]/.test(value)) fail(`${fieldOf('headers', key)} must not contain line breaks or NUL`);
  return spec;
}

function transportOf(server: Json, fail: (problem: string) => never): 'stdio' | 'http' {
  const type = server['type'];
  if (type === 'sse') fail('"type" is "sse": the legacy SSE transport is not supported; use the server\'s Streamable HTTP endpoint ("type": "http")');
  if (type !== undefined && type !== 'stdio' && type !== 'http' && type !== 'streamable-http') fail('"type" must be "stdio", "http" or "streamable-http"');
  const hasCommand = server['command'] !== undefined;
  const hasUrl = server['url'] !== undefined;
  if (hasCommand && hasUrl) fail('"command" and "url" exclude each other; give one');
  if (!hasCommand && !hasUrl) fail('give "command" (a stdio server) or "url" (a Streamable HTTP server)');
  const transport = hasCommand ? 'stdio' : 'http';
  if (type === 'stdio' && transport === 'http') fail('"type" is "stdio" but the entry has "url"; a stdio server has "command"');
  if ((type === 'http' || type === 'streamable-http') && transport === 'stdio')
    fail(`"type" is "${type}" but the entry has "command"; an HTTP server has "url"`);
  if (transport === 'http') {
    const stdioKey = STDIO_ONLY.find((key) => server[key] !== undefined);
    if (stdioKey !== undefined) fail(`"${stdioKey}" applies to a "command" server only`);
    if (server['startup'] === 'lazy') fail('"startup": "lazy" applies to a "command" server only (an HTTP server is listed at start-up)');
  } else if (server['headers'] !== undefined) {
    fail('"headers" applies to a "url" server only');
  }
  return transport;
}

function commonOf(name: string, server: Json, transport: 'stdio' | 'http', fail: (problem: string) => never): Omit<UpstreamCommon, 'variableValues'> {
  const prefix = server['prefix'] ?? name;
  if (typeof prefix !== 'string') fail('"prefix" must be a string');
  if (!NAME_PART.test(prefix as string)) {
    if (server['prefix'] !== undefined) fail('"prefix" may hold only letters, digits, _ and - (tool names must match ^[a-zA-Z0-9_-]{1,64}$)');
    const suggestion = name.replace(/[^a-zA-Z0-9_-]+/g, '_').replace(/^_+|_+$/g, '') || 'upstream';
    fail(`the name is not a valid tool-name prefix (letters, digits, _ and - only); set "prefix", e.g. "prefix": "${suggestion}"`);
  }
  const separator = prefix === '' ? '' : (server['separator'] ?? DEFAULT_SEPARATOR);
  if (typeof separator !== 'string' || !NAME_PART.test(separator)) fail('"separator" must be a string of letters, digits, _ and - only');
  const namespace = (prefix as string).length + (separator as string).length;
  if (namespace > MAX_NAMESPACE_CHARS) {
    fail(`"prefix" and "separator" together are ${namespace} characters; tool names are at most 64, so they may take at most ${MAX_NAMESPACE_CHARS}`);
  }
  const startup = server['startup'] ?? 'eager';
  if (startup !== 'eager' && startup !== 'lazy') fail('"startup" must be "eager" or "lazy"');
  const timeoutMs = server['timeoutMs'];
  if (timeoutMs !== undefined && !isWholeNumberIn(timeoutMs, 1, MAX_TIMEOUT_MS))
    fail(`"timeoutMs" must be a whole number of milliseconds from 1 to ${MAX_TIMEOUT_MS}`);
  const maxConcurrency = server['maxConcurrency'] ?? DEFAULT_UPSTREAM_CONCURRENCY;
  if (!isWholeNumberIn(maxConcurrency, 1, MAX_UPSTREAM_CONCURRENCY)) fail(`"maxConcurrency" must be a whole number from 1 to ${MAX_UPSTREAM_CONCURRENCY}`);
  const maxResultBytes = server['maxResultBytes'] ?? DEFAULT_MAX_RESULT_BYTES;
  if (!isWholeNumberIn(maxResultBytes, MIN_RESULT_BYTES, MAX_MESSAGE_BYTES))
    fail(`"maxResultBytes" must be a whole number of bytes from ${MIN_RESULT_BYTES} to ${MAX_MESSAGE_BYTES} (32 MiB)`);
  return {
    name,
    prefix: prefix as string,
    separator: separator as string,
    startup: transport === 'http' ? 'eager' : (startup as 'eager' | 'lazy'),
    timeoutMs: timeoutMs as number | undefined,
    maxConcurrency: maxConcurrency as number,
    maxResultBytes: maxResultBytes as number,
    tools: toolFilterOf(server['tools'], fail),
  };
}

function toolFilterOf(tools: unknown, fail: (problem: string) => never): UpstreamCommon['tools'] {
  if (tools === undefined) return undefined;
  const shape = '"tools" must be an object with "include" and/or "exclude", each an array of tool names';
  if (!isRecord(tools) || Object.keys(tools).some((key) => key !== 'include' && key !== 'exclude')) fail(shape);
  const filter: { include?: string[]; exclude?: string[] } = {};
  for (const key of ['include', 'exclude'] as const) {
    const names = (tools as Json)[key];
    if (names === undefined) continue;
    if (!Array.isArray(names) || !names.every((n) => typeof n === 'string' && n !== '')) fail(shape);
    filter[key] = [...(names as string[])];
  }
  if (filter.include?.length === 0) fail('"tools.include" is empty, so no tool would be served; to turn the server off, set "disabled": true');
  return filter;
}

/** An object of strings (`env`, `headers`), values expanded; built with fromEntries so a key like `__proto__` stays a plain key. */
function stringMap(
  server: Json,
  key: 'env' | 'headers',
  keyRule: string,
  validKey: (key: string) => boolean,
  expand: (field: string, value: string) => string,
  fail: (problem: string) => never,
): Record<string, string> {
  const map = server[key];
  if (map === undefined) return {};
  if (!isRecord(map)) fail(`"${key}" must be an object of strings`);
  return Object.fromEntries(
    Object.entries(map as Json).map(([name, value]) => {
      if (!validKey(name)) fail(`"${key}" has ${JSON.stringify(name)}, which is not ${keyRule}`);
      const field = fieldOf(key, name);
      if (typeof value !== 'string') fail(`${field} must be a string`);
      return [name, noNul(field, expand(field, value as string), fail)];
    }),
  );
}

/** Replaces `${NAME}` and `${NAME:-default}` (the default also when NAME is empty, as in a shell); a NAME not set and without default stops. */
function expandVariables(value: string, env: Record<string, string | undefined>, field: string, collected: string[], fail: (problem: string) => never): string {
  return value.replace(VARIABLE, (_whole, variable: string, fallback: string | undefined) => {
    const set = env[variable];
    const replacement = set === undefined || (set === '' && fallback !== undefined) ? fallback : set;
    if (replacement === undefined) fail(`${field} names the variable ${variable}, which is not set`);
    collected.push(replacement as string);
    return replacement as string;
  });
}

function checkedUrl(value: string, fail: (problem: string) => never): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    // The value is not shown: a variable may have put a token in it.
    return fail('"url" is not a valid URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') fail(`"url" must use http: or https: (it uses ${url.protocol})`);
  return value;
}

function noNul(field: string, value: string, fail: (problem: string) => never): string {
  if (value.includes('\0')) fail(`${field} must not contain a NUL character`);
  return value;
}

/** A URL's password as the URL holds it and decoded: a log line may show either. */
function passwordsOf(url: string): string[] {
  try {
    const password = new URL(url).password;
    return [password, decodeURIComponent(password)];
  } catch {
    return [];
  }
}

function fieldOf(key: string, name: string): string {
  return /^[A-Za-z_$][\w$-]*$/.test(name) ? `${key}.${name}` : `${key}[${JSON.stringify(name)}]`;
}

function isWholeNumberIn(value: unknown, min: number, max: number): boolean {
  return typeof value === 'number' && Number.isInteger(value) && value >= min && value <= max;
}

/** Where JSON.parse stopped, and why when its message says so without quoting the text (which may hold a secret). */
function jsonErrorLocation(text: string, message: string): string {
  const located = /^(.*) in JSON at position (\d+)/.exec(message);
  if (located === null) return /end of JSON/.test(message) ? ' (it ends too early)' : '';
  const before = text.slice(0, Number(located[2])).split('\n');
  const why = located[1]!.startsWith('Expected') ? `: ${located[1]!.charAt(0).toLowerCase()}${located[1]!.slice(1)}` : '';
  return `${why} (line ${before.length}, column ${before.at(-1)!.length + 1})`;
}
