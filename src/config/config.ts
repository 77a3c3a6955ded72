import { isIP } from 'node:net';
import path from 'node:path';
import { DEFAULT_TOOL_TIMEOUT_MS } from '../core/executor.js';
import { DEFAULT_MAX_CONCURRENCY, DEFAULT_QUEUE_SIZE } from '../core/limiter.js';
import { redactedUrl } from '../infra/net.js';
import type { BashSandboxSetting } from '../os/sandbox/isolation.js';
import { DEFAULT_BASH_LIMITS, type BashLimits } from '../os/sandbox/limits.js';
import {
  DEFAULT_BODY_LIMIT,
  DEFAULT_HEADERS_TIMEOUT_MS,
  DEFAULT_IDLE_TIMEOUT_MS,
  DEFAULT_KEEP_ALIVE_TIMEOUT_MS,
  DEFAULT_REQUEST_TIMEOUT_MS,
} from '../http/defaults.js';

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
// Ten times a large checkout with its dependencies and build output: stops a client filling a
// volume through Write, not normal work. A workspace that needs more sets TOOLPORT_WORKSPACE_QUOTA.
const DEFAULT_WORKSPACE_QUOTA = 10 * 1024 ** 3;
// An hour: no connection deadline needs more, and Node's timers take at most 2^31 - 1 ms.
const MAX_TIMEOUT_MS = 3_600_000;

/** One variable `loadConfig` reads, as docs/configuration.md lists it (`npm run docs`). */
export interface ConfigVariable {
  readonly name: string;
  /** The default, as Markdown text. */
  readonly default: string;
  /** What the variable does, as Markdown text: one table cell. */
  readonly meaning: string;
  /** The page (and anchor) of docs/ that says more, relative to docs/. */
  readonly see?: string;
}

const code = (value: number | string): string => `\`${value}\``;

/**
 * Every variable `loadConfig` reads, in the order of the configuration table; a test fails when
 * `loadConfig` reads one that is not here, or this names one it never reads.
 */
export const CONFIG_VARIABLES: readonly ConfigVariable[] = [
  { name: 'PORT', default: code(3000), meaning: 'port to listen on (`0`: any free port)' },
  { name: 'HOST', default: code('127.0.0.1'), meaning: 'address to listen on; the image sets `0.0.0.0`' },
  { name: 'LOG_LEVEL', default: code('info'), meaning: '`fatal`, `error`, `warn`, `info`, `debug`, `trace` or `silent`' },
  { name: 'TOOLPORT_TOOLS', default: 'all', meaning: 'comma-separated names of the registered tools to serve, in that order' },
  {
    name: 'TOOLPORT_TOOL_TIMEOUT_MS',
    default: code(DEFAULT_TOOL_TIMEOUT_MS),
    meaning: 'deadline of a call, for tools that declare no `timeoutMs` of their own',
  },
  { name: 'TOOLPORT_BODY_LIMIT', default: code(DEFAULT_BODY_LIMIT), meaning: 'largest request body, in bytes' },
  { name: 'TOOLPORT_PLUGINS', default: 'none', meaning: 'comma-separated modules that add tools', see: 'extending.md#plug-ins' },
  {
    name: 'TOOLPORT_UPSTREAMS',
    default: 'none',
    meaning: 'a JSON file with an `mcpServers` object (the shape Claude Desktop, Claude Code and Cursor use): MCP servers whose tools toolport serves too',
    see: 'upstreams.md',
  },
  {
    name: 'TOOLPORT_UPSTREAMS_LOCK',
    default: '`toolport.lock.json` beside the upstreams file',
    meaning: 'the lock file of pinned upstream tool definitions (`toolport upstreams lock`); when it exists, a changed or new definition is not served',
    see: 'upstreams.md#pinned-definitions',
  },
  {
    name: 'TOOLPORT_UPSTREAM_SANDBOX',
    default: code('auto'),
    meaning:
      'run stdio upstreams under Landlock and seccomp: `auto`, where it works here (else unconfined under the reaper supervisor, with a warning); `true`, always (start-up fails without); `false`, never',
    see: 'upstreams.md#isolation',
  },
  {
    name: 'TOOLPORT_UPSTREAM_MAX_PROCESSES',
    default: code(512),
    meaning: 'processes and threads one stdio upstream may have at once, counted every second; past it the upstream is stopped and restarted; `0`: no limit',
    see: 'upstreams.md#isolation',
  },
  {
    name: 'TOOLPORT_UPSTREAM_MAX_MEMORY',
    default: code('4G'),
    meaning: 'resident memory of one stdio upstream and what it started, counted as the processes are; `0`: no limit',
    see: 'upstreams.md#isolation',
  },
  {
    name: 'TOOLPORT_UPSTREAM_TMP_SIZE',
    default: code('1G'),
    meaning: "bytes one stdio upstream's private TMPDIR may hold (in the sandbox only); `0`: no limit",
    see: 'upstreams.md#isolation',
  },
  {
    name: 'TOOLPORT_WORKSPACE',
    default: 'the current directory (`/workspace` in the image)',
    meaning: 'the only directory the file tools may touch; unset, the current directory is refused when it is `/` or the home directory',
    see: 'security.md#the-workspace',
  },
  {
    name: 'HOME',
    default: "the user's home directory",
    meaning: 'read to refuse the home directory as the workspace when `TOOLPORT_WORKSPACE` is not set; given, with `PATH`, to stdio upstreams',
    see: 'mcp.md#connecting-clients',
  },
  {
    name: 'TOOLPORT_WORKSPACE_QUOTA',
    default: code('10G'),
    meaning:
      "disk each workspace (the server's, and each key's own) may use for Write and Edit to go on writing in it: bytes, or with `K`, `M`, `G`, `T` (powers of 1024); `0`: no quota",
    see: 'operations.md#disk',
  },
  {
    name: 'TOOLPORT_BASH_SANDBOX',
    default: code('auto'),
    meaning:
      'run Bash in a sandbox: `auto`, the first that works here (bubblewrap, then Landlock and seccomp); `true`, one of them always (start-up fails without); `bubblewrap` or `landlock`, that one always; `false`, never',
    see: 'security.md#where-bash-is-isolated',
  },
  {
    name: 'TOOLPORT_BASH_NETWORK',
    default: code('none'),
    meaning: 'what a sandboxed Bash command may reach on the network: `none`, or `all` (whatever the server can reach)',
    see: 'security.md#where-bash-is-isolated',
  },
  {
    name: 'TOOLPORT_BASH_MAX_PROCESSES',
    default: code(DEFAULT_BASH_LIMITS.maxProcesses),
    meaning: 'processes and threads one Bash call may have at once; `0`: no limit',
    see: 'security.md#what-one-bash-call-may-take',
  },
  {
    name: 'TOOLPORT_BASH_MAX_MEMORY',
    default: code(DEFAULT_BASH_LIMITS.maxMemory),
    meaning: 'bytes of memory one Bash call may use, where a memory cgroup can be made; `0`: no limit',
    see: 'security.md#what-one-bash-call-may-take',
  },
  {
    name: 'TOOLPORT_BASH_MAX_ADDRESS_SPACE',
    default: code(DEFAULT_BASH_LIMITS.maxAddressSpace),
    meaning: 'bytes of address space each process of a Bash call may map (`RLIMIT_AS`); `0`: no limit',
    see: 'security.md#what-one-bash-call-may-take',
  },
  {
    name: 'TOOLPORT_BASH_MAX_FILE_SIZE',
    default: code(DEFAULT_BASH_LIMITS.maxFileSize),
    meaning: 'largest file a Bash command may write, in bytes; `0`: no limit',
    see: 'security.md#what-one-bash-call-may-take',
  },
  {
    name: 'TOOLPORT_BASH_MAX_CPU_SECONDS',
    default: code(DEFAULT_BASH_LIMITS.maxCpuSeconds),
    meaning: 'CPU seconds each process of a Bash call may use, never more than its timeout; `0`: no limit',
    see: 'security.md#what-one-bash-call-may-take',
  },
  {
    name: 'TOOLPORT_BASH_TMP_SIZE',
    default: code(DEFAULT_BASH_LIMITS.tmpSize),
    meaning: "bytes the Bash sandbox's `/tmp` and `/dev/shm` each hold; `0`: half the RAM, as tmpfs does",
    see: 'security.md#what-one-bash-call-may-take',
  },
  {
    name: 'TOOLPORT_SHUTDOWN_GRACE_MS',
    default: code(10_000),
    meaning: 'how long calls in flight may run on after SIGTERM before they are aborted',
    see: 'operations.md#signals-and-shutdown',
  },
  { name: 'TOOLPORT_DOCS', default: code('true'), meaning: 'serve the API browser at `/docs`' },
  { name: 'TOOLPORT_API_KEYS', default: 'none', meaning: 'comma-separated API keys with access to every served tool', see: 'security.md#api-keys' },
  { name: 'TOOLPORT_API_KEYS_FILE', default: 'none', meaning: 'a JSON file of scoped keys', see: 'security.md#api-keys' },
  { name: 'TOOLPORT_PUBLIC_DOCS', default: code('false'), meaning: 'with keys configured, leave `/docs`, `/openapi.json` and `/openapi.tools.json` open' },
  {
    name: 'TOOLPORT_ALLOW_UNAUTHENTICATED',
    default: code('false'),
    meaning: 'serve tools that are not read-only on a non-loopback address without keys',
    see: 'security.md#safe-by-default',
  },
  {
    name: 'TOOLPORT_RATE_LIMIT',
    default: code(600),
    meaning: 'requests per minute per API key (per client address without keys); `0` switches it off',
    see: 'operations.md#limits-and-metrics',
  },
  {
    name: 'TOOLPORT_REDIS_URL',
    default: 'none',
    meaning:
      'keep the rate-limit counts in this Redis (`redis://[:password@]host[:port][/db]`, `rediss://` for TLS), shared by every replica, and pass MCP cancellations between replicas through it; without it each process counts alone and a cancellation reaches its own process only',
    see: 'deployment.md#running-many-replicas',
  },
  {
    name: 'TOOLPORT_MAX_CONCURRENCY',
    default: code(DEFAULT_MAX_CONCURRENCY),
    meaning: 'most calls of any one tool that run at once (a tool may set a lower `maxConcurrency`; Bash: 4)',
    see: 'operations.md#limits-and-metrics',
  },
  {
    name: 'TOOLPORT_QUEUE_SIZE',
    default: code(DEFAULT_QUEUE_SIZE),
    meaning: 'most calls of one tool that wait for a slot; past it, 503 `QUEUE_FULL` (`0`: no waiting)',
    see: 'operations.md#limits-and-metrics',
  },
  {
    name: 'TOOLPORT_MAX_CONCURRENCY_PER_CALLER',
    default: "half of each tool's slots, rounded up",
    meaning: 'most calls of one API key (client address without keys) that run at once, per tool',
    see: 'operations.md#limits-and-metrics',
  },
  {
    name: 'TOOLPORT_QUEUE_PER_CALLER',
    default: 'a quarter of `TOOLPORT_QUEUE_SIZE`, rounded up',
    meaning: 'most calls of one API key (client address) that wait for a slot, per tool; past it, 503 `QUEUE_FULL`',
    see: 'operations.md#limits-and-metrics',
  },
  {
    name: 'TOOLPORT_HEADERS_TIMEOUT_MS',
    default: code(DEFAULT_HEADERS_TIMEOUT_MS),
    meaning: "time for a request's headers to arrive (at most `TOOLPORT_REQUEST_TIMEOUT_MS`); past it, 408 `REQUEST_TIMEOUT` and the connection closes",
    see: 'operations.md#connections',
  },
  {
    name: 'TOOLPORT_REQUEST_TIMEOUT_MS',
    default: code(DEFAULT_REQUEST_TIMEOUT_MS),
    meaning:
      'time for a whole request, body included, to arrive; past it, 408 `REQUEST_TIMEOUT`. It bounds receiving the request, not the call: a response may take as long as its tool',
    see: 'operations.md#connections',
  },
  {
    name: 'TOOLPORT_KEEP_ALIVE_TIMEOUT_MS',
    default: code(DEFAULT_KEEP_ALIVE_TIMEOUT_MS),
    meaning: 'how long a kept-alive connection may sit idle between requests (longer than the 60 s of common load balancers, which must close first)',
    see: 'operations.md#connections',
  },
  {
    name: 'TOOLPORT_IDLE_TIMEOUT_MS',
    default: code(DEFAULT_IDLE_TIMEOUT_MS),
    meaning: 'how long a connection may see no traffic while none of its calls runs (a client that stopped reading its response)',
    see: 'operations.md#connections',
  },
  {
    name: 'TOOLPORT_MAX_CONNECTIONS',
    default: 'from `ulimit -n`',
    meaning:
      'most connections open at once; past it a new one is closed as soon as it is accepted. Default: the descriptor limit less those open at start-up and a reserve for tool calls (a quarter of the limit, at least 64)',
    see: 'operations.md#connections',
  },
  {
    name: 'TOOLPORT_ALLOWED_HOSTS',
    default: 'none',
    meaning:
      'comma-separated host names or IP addresses the server answers to besides local ones, such as the public name a reverse proxy forwards; when set, any other `Host` is a 403',
    see: 'security.md#host-and-origin-guard',
  },
  {
    name: 'TOOLPORT_ALLOWED_ORIGINS',
    default: 'none',
    meaning: 'comma-separated web origins (`https://app.example.com`) that may call besides local ones, where `Origin` is checked',
    see: 'security.md#host-and-origin-guard',
  },
  {
    name: 'TOOLPORT_CORS_ORIGINS',
    default: 'none',
    meaning:
      'comma-separated exact web origins whose pages may call through CORS, such as a browser-side Open WebUI tool server: preflights answered, `Access-Control-Allow-Origin` on every answer to them, and they pass the `Origin` check; `*` stops start-up',
    see: 'security.md#cors',
  },
  {
    name: 'TOOLPORT_TRUST_PROXY',
    default: code('false'),
    meaning:
      'whose `X-Forwarded-For` to believe, for rate limits and logs: `true` (any peer), a hop count (`1`), or comma-separated addresses and CIDR ranges of the proxies (`10.0.0.0/8,loopback`)',
    see: 'security.md#behind-a-reverse-proxy',
  },
  {
    name: 'TOOLPORT_PERMISSIONS',
    default: 'none',
    meaning: 'A JSON file of permission rules `{"allow": [...], "deny": [...]}` every key inherits and may narrow; see docs/security.md',
  },
  {
    name: 'TOOLPORT_OAUTH_ISSUER',
    default: 'none',
    meaning:
      'comma-separated issuer URLs of the OAuth 2.1 / OpenID authorization servers whose access tokens toolport accepts (`https://`, or `http://` on loopback); with it, toolport is a resource server beside its keys',
    see: 'oauth.md',
  },
  {
    name: 'TOOLPORT_PUBLIC_URL',
    default: 'none',
    meaning:
      "the absolute URL clients reach toolport at (`https://tools.example.com`): the resource the protected-resource metadata names and tokens' audience must contain; required with `TOOLPORT_OAUTH_ISSUER`",
    see: 'oauth.md',
  },
  {
    name: 'TOOLPORT_OAUTH_AUDIENCE',
    default: '`TOOLPORT_PUBLIC_URL` and its `/mcp`',
    meaning: "comma-separated values of which a token's `aud` must hold one (for providers that cannot put the resource URL there)",
    see: 'oauth.md#audience',
  },
  {
    name: 'TOOLPORT_OAUTH_JWKS_URL',
    default: "the issuer's `jwks_uri`",
    meaning: "where the issuer's signing keys are, when its metadata does not say (one issuer only)",
    see: 'oauth.md',
  },
  {
    name: 'TOOLPORT_OAUTH_SCOPES',
    default: "`tools:*`, `tools:<name>` per tool, and the mapping's scope names",
    meaning: 'comma-separated scopes the protected-resource metadata advertises (clients ask for these)',
    see: 'oauth.md#scopes-and-permissions',
  },
  {
    name: 'TOOLPORT_OAUTH_TOOLS_CLAIM',
    default: 'none',
    meaning: 'a claim (dotted path, such as `realm_access.roles`) whose values grant tools as scopes do',
    see: 'oauth.md#scopes-and-permissions',
  },
  {
    name: 'TOOLPORT_OAUTH_MAPPING',
    default: 'none',
    meaning: 'a JSON file of scope names, subjects and groups mapped to tools, workspaces and permission rules',
    see: 'oauth.md#the-mapping-file',
  },
  {
    name: 'TOOLPORT_OAUTH_CLIENT_ID',
    default: 'none',
    meaning: "with `TOOLPORT_OAUTH_CLIENT_SECRET`: toolport's own client at the (first) issuer, to introspect opaque tokens (RFC 7662)",
    see: 'oauth.md#opaque-tokens',
  },
  { name: 'TOOLPORT_OAUTH_CLIENT_SECRET', default: 'none', meaning: 'the secret of `TOOLPORT_OAUTH_CLIENT_ID`', see: 'oauth.md#opaque-tokens' },
];

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
  /** The upstream MCP servers' file (TOOLPORT_UPSTREAMS); undefined: none. */
  upstreams: string | undefined;
  /** The lock file of pinned upstream definitions; undefined: beside the upstreams file. */
  upstreamsLock: string | undefined;
  /** How long calls in flight may run on after SIGTERM before they are aborted. */
  shutdownGraceMs: number;
  /** The only directory the file tools may touch. */
  workspace: string;
  /** Most bytes each workspace may use for Write and Edit to go on writing in it (TOOLPORT_WORKSPACE_QUOTA); 0: no quota. */
  workspaceQuota: number;
  /** Run stdio upstreams under Landlock and seccomp (TOOLPORT_UPSTREAM_SANDBOX): `auto`, where it works; `true`, always (or fail); `false`, never. */
  upstreamSandbox: 'auto' | 'true' | 'false';
  /** What the supervisor holds each stdio upstream to (TOOLPORT_UPSTREAM_MAX_PROCESSES, _MAX_MEMORY, _TMP_SIZE); 0 switches one off. */
  upstreamLimits: { maxProcesses: number; maxMemory: number; tmpSize: number };
  /** Run Bash in a sandbox: `auto`, the first that works; `true`, one always (or fail); `bubblewrap` or `landlock`, that one; `false`, never. */
  bashSandbox: BashSandboxSetting;
  /** Sandboxed Bash commands may use the network (TOOLPORT_BASH_NETWORK=all). */
  bashNetwork: boolean;
  /** Bounds on each Bash call (TOOLPORT_BASH_MAX_PROCESSES, _TMP_SIZE, _MAX_FILE_SIZE, _MAX_MEMORY, _MAX_ADDRESS_SPACE, _MAX_CPU_SECONDS); 0 switches one off. */
  bashLimits: BashLimits;
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
  /** A Redis server (`redis://` or `rediss://` URL) that keeps the rate-limit counts, shared by every replica; undefined: each process counts alone. */
  redisUrl: string | undefined;
  /** Most calls of any one tool that run at once. */
  maxConcurrency: number;
  /** Most calls of any one tool that may wait for a slot; past it, 503. */
  queueSize: number;
  /** Most calls of one caller (key, or client address without keys) that run at once, per tool; undefined: half the tool's slots, rounded up. */
  maxConcurrencyPerCaller: number | undefined;
  /** Most calls of one caller that may wait for a slot, per tool; undefined: a quarter of the queue, rounded up. */
  queuePerCaller: number | undefined;
  /** Time for a request's headers to arrive, in ms (at most `requestTimeoutMs`). */
  headersTimeoutMs: number;
  /** Time for a whole request, body included, to arrive, in ms; the response may take longer. */
  requestTimeoutMs: number;
  /** How long a kept-alive connection may sit idle between requests, in ms. */
  keepAliveTimeoutMs: number;
  /** How long a connection may see no traffic while none of its calls runs, in ms. */
  idleTimeoutMs: number;
  /** Most connections open at once; undefined: derived from the descriptor limit at start-up. */
  maxConnections: number | undefined;
  /** Host names (or IP addresses) the server answers to besides local ones, lower case. */
  allowedHosts: string[];
  /** Web origins allowed to call besides local ones, as `URL.origin` writes them. */
  allowedOrigins: string[];
  /** Web origins whose pages may call through CORS (and pass the Origin check), as `URL.origin` writes them; none: no CORS. */
  corsOrigins: string[];
  /** Whose X-Forwarded-For to believe: no one, every peer, this many hops, or these addresses and CIDR ranges. */
  trustProxy: boolean | number | string[];
  /** A JSON file of permission rules every key inherits (TOOLPORT_PERMISSIONS); absent: none. */
  permissionsFile?: string;
  /** toolport as an OAuth 2.1 resource server (TOOLPORT_OAUTH_ISSUER and its companions); absent: keys only. */
  oauth?: OAuthConfig;
}

/** The OAuth resource server's settings, checked for form only: the issuers are reached at start-up. */
export interface OAuthConfig {
  /** The issuers whose tokens are accepted, exactly as their `iss` claim writes them. */
  issuers: string[];
  /** The resource's canonical URL (TOOLPORT_PUBLIC_URL), without a trailing slash. */
  publicUrl: string;
  /** Values of which a token's `aud` must hold one; undefined: the public URL and its `/mcp`. */
  audiences: string[] | undefined;
  /** The issuer's JWKS, when its metadata does not name it (one issuer only). */
  jwksUrl: string | undefined;
  /** The scopes the protected-resource metadata advertises; undefined: derived from the tools. */
  scopes: string[] | undefined;
  /** A claim (dotted path) whose values grant tools as scopes do. */
  toolsClaim: string | undefined;
  /** The mapping file (TOOLPORT_OAUTH_MAPPING). */
  mappingFile: string | undefined;
  /** toolport's own client at the first issuer, to introspect opaque tokens; undefined: JWTs only. */
  introspectionClient: { id: string; secret: string } | undefined;
}

/** Raised for a missing or malformed variable; the message names it and says what is expected. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  readonly variable: string;

  constructor(variable: string, expected: string, got: string, message = `Invalid ${variable}: expected ${expected}, got ${JSON.stringify(got)}`) {
    super(message);
    this.variable = variable;
  }
}

/**
 * The workspace when TOOLPORT_WORKSPACE is unset: the working directory, unless that is `/` or
 * the home directory itself. Desktop clients start `toolport mcp` from a directory the user did
 * not choose (often `/`), which would quietly make the whole file system, or every file of the
 * user, the file tools' and Bash's workspace.
 */
function implicitWorkspace(env: Env, cwd: string): string {
  const dir = path.resolve(cwd);
  const home = raw(env, 'HOME');
  const what =
    dir === path.parse(dir).root ? 'the root of the file system' : home !== undefined && dir === path.resolve(home) ? 'the home directory' : undefined;
  if (what === undefined) return cwd;
  throw new ConfigError(
    'TOOLPORT_WORKSPACE',
    '',
    '',
    `TOOLPORT_WORKSPACE is not set, and the working directory ${dir} is ${what}, which toolport does not take as its workspace by default: ` +
      'set TOOLPORT_WORKSPACE (or pass --workspace) to the directory the tools may work in.',
  );
}

/** A warning for a workspace set explicitly to the root of the file system, or undefined. */
export function workspaceWarning(config: Pick<Config, 'workspace'>): string | undefined {
  const dir = path.resolve(config.workspace);
  if (dir !== path.parse(dir).root) return undefined;
  return `TOOLPORT_WORKSPACE is ${dir}: the file tools and Bash may touch every file the server's user can`;
}

type Env = Record<string, string | undefined>;

/** Reads and validates the configuration; throws `ConfigError` naming the first bad variable. */
export function loadConfig(env: Env = process.env, cwd = process.cwd()): Config {
  const requestTimeoutMs = integer(env, 'TOOLPORT_REQUEST_TIMEOUT_MS', DEFAULT_REQUEST_TIMEOUT_MS, 1, MAX_TIMEOUT_MS);
  return {
    port: integer(env, 'PORT', 3000, 0, 65535),
    host: text(env, 'HOST', '127.0.0.1'),
    logLevel: oneOf(env, 'LOG_LEVEL', LOG_LEVELS, 'info'),
    tools: list(env, 'TOOLPORT_TOOLS'),
    toolTimeoutMs: integer(env, 'TOOLPORT_TOOL_TIMEOUT_MS', DEFAULT_TOOL_TIMEOUT_MS, 1, 2_147_483_647),
    bodyLimit: integer(env, 'TOOLPORT_BODY_LIMIT', DEFAULT_BODY_LIMIT, 1, 1024 ** 3),
    plugins: list(env, 'TOOLPORT_PLUGINS') ?? [],
    upstreams: raw(env, 'TOOLPORT_UPSTREAMS'),
    upstreamsLock: raw(env, 'TOOLPORT_UPSTREAMS_LOCK'),
    upstreamSandbox: oneOf(env, 'TOOLPORT_UPSTREAM_SANDBOX', ['auto', 'true', 'false'], 'auto'),
    upstreamLimits: {
      maxProcesses: integer(env, 'TOOLPORT_UPSTREAM_MAX_PROCESSES', 512, 0, 1_000_000),
      maxMemory: byteSize(env, 'TOOLPORT_UPSTREAM_MAX_MEMORY', 4 * 1024 ** 3),
      tmpSize: byteSize(env, 'TOOLPORT_UPSTREAM_TMP_SIZE', 1024 ** 3),
    },
    shutdownGraceMs: integer(env, 'TOOLPORT_SHUTDOWN_GRACE_MS', 10_000, 0, 600_000),
    workspace: raw(env, 'TOOLPORT_WORKSPACE') ?? implicitWorkspace(env, cwd),
    workspaceQuota: byteSize(env, 'TOOLPORT_WORKSPACE_QUOTA', DEFAULT_WORKSPACE_QUOTA),
    bashSandbox: sandboxSetting(env, 'TOOLPORT_BASH_SANDBOX'),
    bashNetwork: oneOf(env, 'TOOLPORT_BASH_NETWORK', ['none', 'all'], 'none') === 'all',
    bashLimits: bashLimits(env),
    docs: boolean(env, 'TOOLPORT_DOCS', true),
    apiKeys: list(env, 'TOOLPORT_API_KEYS', { secret: true }) ?? [],
    apiKeysFile: raw(env, 'TOOLPORT_API_KEYS_FILE'),
    publicDocs: boolean(env, 'TOOLPORT_PUBLIC_DOCS', false),
    allowUnauthenticated: boolean(env, 'TOOLPORT_ALLOW_UNAUTHENTICATED', false),
    rateLimit: integer(env, 'TOOLPORT_RATE_LIMIT', 600, 0, 1_000_000),
    redisUrl: redisUrl(env, 'TOOLPORT_REDIS_URL'),
    maxConcurrency: integer(env, 'TOOLPORT_MAX_CONCURRENCY', DEFAULT_MAX_CONCURRENCY, 1, 10_000),
    queueSize: integer(env, 'TOOLPORT_QUEUE_SIZE', DEFAULT_QUEUE_SIZE, 0, 100_000),
    maxConcurrencyPerCaller: optionalInteger(env, 'TOOLPORT_MAX_CONCURRENCY_PER_CALLER', 1, 10_000),
    queuePerCaller: optionalInteger(env, 'TOOLPORT_QUEUE_PER_CALLER', 0, 100_000),
    headersTimeoutMs: headersTimeout(env, 'TOOLPORT_HEADERS_TIMEOUT_MS', requestTimeoutMs),
    requestTimeoutMs,
    keepAliveTimeoutMs: integer(env, 'TOOLPORT_KEEP_ALIVE_TIMEOUT_MS', DEFAULT_KEEP_ALIVE_TIMEOUT_MS, 1, MAX_TIMEOUT_MS),
    idleTimeoutMs: integer(env, 'TOOLPORT_IDLE_TIMEOUT_MS', DEFAULT_IDLE_TIMEOUT_MS, 1, MAX_TIMEOUT_MS),
    maxConnections: optionalInteger(env, 'TOOLPORT_MAX_CONNECTIONS', 1, 1_000_000),
    allowedHosts: checkedList(env, 'TOOLPORT_ALLOWED_HOSTS', hostName, 'host names or IP addresses, without scheme or port'),
    allowedOrigins: checkedList(
      env,
      'TOOLPORT_ALLOWED_ORIGINS',
      webOrigin,
      'web origins such as https://app.example.com (http or https, a host, an optional port, no path)',
    ),
    corsOrigins: corsOrigins(env, 'TOOLPORT_CORS_ORIGINS', raw(env, 'TOOLPORT_API_KEYS') !== undefined || raw(env, 'TOOLPORT_API_KEYS_FILE') !== undefined),
    trustProxy: trustProxy(env, 'TOOLPORT_TRUST_PROXY'),
    ...optional('permissionsFile', raw(env, 'TOOLPORT_PERMISSIONS')),
    ...optional('oauth', oauth(env)),
  };
}

/** `{ [name]: value }`, or nothing when the value is undefined: an unset optional variable leaves no key behind. */
function optional<K extends string, V>(name: K, value: V | undefined): { [P in K]?: V } {
  return (value === undefined ? {} : { [name]: value }) as { [P in K]?: V };
}

const OAUTH_COMPANIONS = [
  'TOOLPORT_PUBLIC_URL',
  'TOOLPORT_OAUTH_AUDIENCE',
  'TOOLPORT_OAUTH_JWKS_URL',
  'TOOLPORT_OAUTH_SCOPES',
  'TOOLPORT_OAUTH_TOOLS_CLAIM',
  'TOOLPORT_OAUTH_MAPPING',
  'TOOLPORT_OAUTH_CLIENT_ID',
  'TOOLPORT_OAUTH_CLIENT_SECRET',
] as const;

/** The OAuth settings, when TOOLPORT_OAUTH_ISSUER is set; a companion set without it is a mistake, not ignored. */
function oauth(env: Env): OAuthConfig | undefined {
  const issuers = checkedList(env, 'TOOLPORT_OAUTH_ISSUER', (item) => (serverUrl(item) === undefined ? undefined : item), ISSUER_EXPECTED);
  if (issuers.length === 0) {
    const stray = OAUTH_COMPANIONS.find((name) => raw(env, name) !== undefined && name !== 'TOOLPORT_PUBLIC_URL');
    if (stray !== undefined) throw new ConfigError(stray, '', '', `${stray} is set but TOOLPORT_OAUTH_ISSUER is not: set the issuer too, or unset ${stray}`);
    return undefined;
  }
  const publicUrl = raw(env, 'TOOLPORT_PUBLIC_URL');
  if (publicUrl === undefined)
    throw new ConfigError(
      'TOOLPORT_PUBLIC_URL',
      '',
      '',
      'TOOLPORT_PUBLIC_URL is required with TOOLPORT_OAUTH_ISSUER: the absolute URL clients reach toolport at',
    );
  const canonical = serverUrl(publicUrl);
  if (canonical === undefined) throw new ConfigError('TOOLPORT_PUBLIC_URL', URL_EXPECTED, publicUrl);
  const jwksUrl = raw(env, 'TOOLPORT_OAUTH_JWKS_URL');
  if (jwksUrl !== undefined) {
    if (serverUrl(jwksUrl) === undefined) throw new ConfigError('TOOLPORT_OAUTH_JWKS_URL', URL_EXPECTED, jwksUrl);
    if (issuers.length > 1)
      throw new ConfigError('TOOLPORT_OAUTH_JWKS_URL', 'one issuer in TOOLPORT_OAUTH_ISSUER (each of several issuers names its own keys)', jwksUrl);
  }
  const clientId = raw(env, 'TOOLPORT_OAUTH_CLIENT_ID');
  const clientSecret = raw(env, 'TOOLPORT_OAUTH_CLIENT_SECRET');
  if ((clientId === undefined) !== (clientSecret === undefined)) {
    const missing = clientId === undefined ? 'TOOLPORT_OAUTH_CLIENT_ID' : 'TOOLPORT_OAUTH_CLIENT_SECRET';
    throw new ConfigError(
      missing,
      '',
      '',
      `${missing} is required with ${missing === 'TOOLPORT_OAUTH_CLIENT_ID' ? 'TOOLPORT_OAUTH_CLIENT_SECRET' : 'TOOLPORT_OAUTH_CLIENT_ID'}`,
    );
  }
  return {
    issuers,
    publicUrl: canonical,
    audiences: list(env, 'TOOLPORT_OAUTH_AUDIENCE'),
    jwksUrl,
    scopes: list(env, 'TOOLPORT_OAUTH_SCOPES'),
    toolsClaim: raw(env, 'TOOLPORT_OAUTH_TOOLS_CLAIM'),
    mappingFile: raw(env, 'TOOLPORT_OAUTH_MAPPING'),
    introspectionClient: clientId === undefined || clientSecret === undefined ? undefined : { id: clientId, secret: clientSecret },
  };
}

const ISSUER_EXPECTED = 'absolute https URLs (http only on a loopback host) without query, fragment or credentials';
const URL_EXPECTED = 'an absolute https URL (http only on a loopback host) without query, fragment or credentials';

/**
 * An absolute URL a server is known by, without a trailing slash, or undefined: https, or http on
 * a loopback host (a token sent in the clear elsewhere could be read on the way); no query,
 * fragment or credentials.
 */
function serverUrl(item: string): string | undefined {
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

/** Bytes, as a count or with a binary suffix: `1048576`, `512K`, `512M`, `10G`, `1T`; `0` is allowed. */
function byteSize(env: Env, name: string, fallback: number): number {
  const value = raw(env, name);
  if (value === undefined) return fallback;
  const match = /^(\d{1,15})([kmgt])?$/i.exec(value);
  const power = match?.[2] === undefined ? 0 : 'kmgt'.indexOf(match[2].toLowerCase()) + 1;
  const n = match === null ? NaN : Number(match[1]) * 1024 ** power;
  if (!Number.isSafeInteger(n))
    throw new ConfigError(name, 'a size in bytes, optionally with K, M, G or T (powers of 1024), such as 10G; 0 for no quota', value);
  return n;
}

function boolean(env: Env, name: string, fallback: boolean): boolean {
  const value = raw(env, name)?.toLowerCase();
  if (value === undefined) return fallback;
  if (['true', '1', 'yes'].includes(value)) return true;
  if (['false', '0', 'no'].includes(value)) return false;
  throw new ConfigError(name, 'true or false', value);
}

function sandboxSetting(env: Env, name: string): BashSandboxSetting {
  const value = raw(env, name)?.toLowerCase();
  if (value === undefined || value === 'auto') return 'auto';
  if (['true', '1', 'yes'].includes(value)) return true;
  if (['false', '0', 'no'].includes(value)) return false;
  if (value === 'bubblewrap' || value === 'landlock') return value;
  throw new ConfigError(name, 'auto, true, false, bubblewrap or landlock', value);
}

const MAX_BYTES = 1024 ** 5;

/** Each bound an integer from 0 (off); sizes in bytes, up to a PiB; CPU seconds up to a day. */
function bashLimits(env: Env): BashLimits {
  const d = DEFAULT_BASH_LIMITS;
  return {
    maxProcesses: integer(env, 'TOOLPORT_BASH_MAX_PROCESSES', d.maxProcesses, 0, 1_000_000),
    tmpSize: integer(env, 'TOOLPORT_BASH_TMP_SIZE', d.tmpSize, 0, MAX_BYTES),
    maxFileSize: integer(env, 'TOOLPORT_BASH_MAX_FILE_SIZE', d.maxFileSize, 0, MAX_BYTES),
    maxMemory: integer(env, 'TOOLPORT_BASH_MAX_MEMORY', d.maxMemory, 0, MAX_BYTES),
    maxAddressSpace: integer(env, 'TOOLPORT_BASH_MAX_ADDRESS_SPACE', d.maxAddressSpace, 0, MAX_BYTES),
    maxCpuSeconds: integer(env, 'TOOLPORT_BASH_MAX_CPU_SECONDS', d.maxCpuSeconds, 0, 86_400),
  };
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

/** Node requires the header deadline to fall within the request's (TOOLPORT_REQUEST_TIMEOUT_MS). */
function headersTimeout(env: Env, name: string, requestTimeoutMs: number): number {
  const ms = integer(env, name, Math.min(DEFAULT_HEADERS_TIMEOUT_MS, requestTimeoutMs), 1, MAX_TIMEOUT_MS);
  if (ms > requestTimeoutMs) throw new ConfigError(name, `at most TOOLPORT_REQUEST_TIMEOUT_MS (${requestTimeoutMs})`, String(ms));
  return ms;
}

function optionalInteger(env: Env, name: string, min: number, max: number): number | undefined {
  return raw(env, name) === undefined ? undefined : integer(env, name, 0, min, max);
}

/** A list whose every item `check` accepts (returning it normalised); the error names the first bad item. */
function checkedList(env: Env, name: string, check: (item: string) => string | undefined, expected: string): string[] {
  return (list(env, name) ?? []).map((item) => {
    const normalised = check(item);
    if (normalised === undefined) throw new ConfigError(name, `a comma-separated list of ${expected}`, item);
    return normalised;
  });
}

// A DNS name (labels of letters, digits and inner hyphens or underscores), which covers IPv4 too.
const DNS_NAME = /^(?=.{1,253}$)[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)*$/i;

/** A Host header's name part, lower case: a DNS name, an IPv4 address or a bracketed IPv6 address. */
function hostName(item: string): string | undefined {
  const bracketed = /^\[(.*)\]$/.exec(item)?.[1];
  if (bracketed !== undefined) return isIP(bracketed) === 6 ? item.toLowerCase() : undefined;
  return DNS_NAME.test(item) ? item.toLowerCase() : undefined;
}

/** An http(s) origin as browsers send it (`URL.origin`: lower case, default port left out), or undefined. */
function webOrigin(item: string): string | undefined {
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
function corsOrigins(env: Env, name: string, keyed: boolean): string[] {
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
function redisUrl(env: Env, name: string): string | undefined {
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
function trustProxy(env: Env, name: string): boolean | number | string[] {
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
