import { DEFAULT_BODY_LIMIT } from './http/app.js';
import { DEFAULT_TOOL_TIMEOUT_MS } from './core/executor.js';

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** Everything the service reads from its environment, validated. Nothing else reads `process.env`. */
export interface Config {
  port: number;
  host: string;
  logLevel: (typeof LOG_LEVELS)[number];
  /** Names of the registered tools to serve; undefined serves all. */
  tools: string[] | undefined;
  toolTimeoutMs: number;
  bodyLimit: number;
  /** Modules that add tools: file paths or package names. */
  plugins: string[];
  /** How long calls in flight may run on after SIGTERM before they are aborted. */
  shutdownGraceMs: number;
  /** The only directory the file tools may touch. */
  workspace: string;
  /** Run Bash inside the bubblewrap sandbox: `auto` when a trial run at start-up works, `true` always (or fail), `false` never. */
  bashSandbox: boolean | 'auto';
  /** Serve the API browser at /docs. */
  docs: boolean;
  /** Keys with access to every served tool (TOOLPORT_API_KEYS). */
  apiKeys: string[];
  /** A JSON file of scoped keys: [{ label, key, tools? }]. */
  apiKeysFile: string | undefined;
  /** With keys configured, leave /docs and /openapi.json open to everyone. */
  publicDocs: boolean;
  /** Serve tools that are not read-only on a non-loopback address without keys. */
  allowUnauthenticated: boolean;
  /** Calls per minute per key (or client address without keys); 0 switches the limit off. */
  rateLimit: number;
  /** Most calls of any one tool that run at once. */
  maxConcurrency: number;
  /** Most calls of any one tool that may wait for a slot; past it, 503. */
  queueSize: number;
}

/** Raised for a missing or malformed variable; the message names it and says what is expected. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  readonly variable: string;

  constructor(variable: string, expected: string, got: string) {
    super(`Invalid ${variable}: expected ${expected}, got ${JSON.stringify(got)}`);
    this.variable = variable;
  }
}

type Env = Record<string, string | undefined>;

/** Reads and validates the configuration; throws `ConfigError` naming the first bad variable. */
export function loadConfig(env: Env = process.env, cwd = process.cwd()): Config {
  return {
    port: integer(env, 'PORT', 3000, 0, 65535),
    host: text(env, 'HOST', '127.0.0.1'),
    logLevel: oneOf(env, 'LOG_LEVEL', LOG_LEVELS, 'info'),
    tools: list(env, 'TOOLPORT_TOOLS'),
    toolTimeoutMs: integer(env, 'TOOLPORT_TOOL_TIMEOUT_MS', DEFAULT_TOOL_TIMEOUT_MS, 1, 2_147_483_647),
    bodyLimit: integer(env, 'TOOLPORT_BODY_LIMIT', DEFAULT_BODY_LIMIT, 1, 1024 ** 3),
    plugins: list(env, 'TOOLPORT_PLUGINS') ?? [],
    shutdownGraceMs: integer(env, 'TOOLPORT_SHUTDOWN_GRACE_MS', 10_000, 0, 600_000),
    workspace: text(env, 'TOOLPORT_WORKSPACE', cwd),
    bashSandbox: booleanOrAuto(env, 'TOOLPORT_BASH_SANDBOX'),
    docs: boolean(env, 'TOOLPORT_DOCS', true),
    apiKeys: list(env, 'TOOLPORT_API_KEYS', { secret: true }) ?? [],
    apiKeysFile: raw(env, 'TOOLPORT_API_KEYS_FILE'),
    publicDocs: boolean(env, 'TOOLPORT_PUBLIC_DOCS', false),
    allowUnauthenticated: boolean(env, 'TOOLPORT_ALLOW_UNAUTHENTICATED', false),
    rateLimit: integer(env, 'TOOLPORT_RATE_LIMIT', 600, 0, 1_000_000),
    maxConcurrency: integer(env, 'TOOLPORT_MAX_CONCURRENCY', 16, 1, 10_000),
    queueSize: integer(env, 'TOOLPORT_QUEUE_SIZE', 64, 0, 100_000),
  };
}

function raw(env: Env, name: string): string | undefined {
  const value = env[name]?.trim();
  return value === '' ? undefined : value;
}

function text(env: Env, name: string, fallback: string): string {
  return raw(env, name) ?? fallback;
}

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const value = raw(env, name);
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < min || n > max) throw new ConfigError(name, `an integer from ${min} to ${max}`, value);
  return n;
}

function boolean(env: Env, name: string, fallback: boolean): boolean {
  const value = raw(env, name)?.toLowerCase();
  if (value === undefined) return fallback;
  if (['true', '1', 'yes'].includes(value)) return true;
  if (['false', '0', 'no'].includes(value)) return false;
  throw new ConfigError(name, 'true or false', value);
}

function booleanOrAuto(env: Env, name: string): boolean | 'auto' {
  const value = raw(env, name)?.toLowerCase();
  if (value === undefined || value === 'auto') return 'auto';
  if (['true', '1', 'yes'].includes(value)) return true;
  if (['false', '0', 'no'].includes(value)) return false;
  throw new ConfigError(name, 'auto, true or false', value);
}

function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T {
  const value = raw(env, name);
  if (value === undefined) return fallback;
  if (!(allowed as readonly string[]).includes(value)) throw new ConfigError(name, `one of ${allowed.join(', ')}`, value);
  return value as T;
}

function list(env: Env, name: string, { secret = false } = {}): string[] | undefined {
  const value = raw(env, name);
  if (value === undefined) return undefined;
  const items = value.split(',').map((s) => s.trim());
  // A secret's value never goes into an error message (it would end up in logs).
  if (items.some((s) => s === '')) throw new ConfigError(name, 'a comma-separated list without empty items', secret ? '(hidden)' : value);
  return items;
}
