import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ConfigError, loadConfig, workspaceWarning, type Config } from '#src/config/config.js';

const CWD = '/srv/toolport';

const DEFAULTS: Config = {
  port: 3000,
  host: '127.0.0.1',
  logLevel: 'info',
  tools: undefined,
  toolTimeoutMs: 60_000,
  bodyLimit: 1024 * 1024,
  plugins: [],
  upstreams: undefined,
  upstreamsLock: undefined,
  upstreamSandbox: 'auto',
  upstreamLimits: { maxProcesses: 512, maxMemory: 4 * 1024 ** 3, tmpSize: 1024 ** 3 },
  shutdownGraceMs: 10_000,
  workspace: CWD,
  workspaceQuota: 10 * 1024 ** 3,
  bashSandbox: 'auto',
  bashNetwork: false,
  bashLimits: { maxProcesses: 512, tmpSize: 128 * 1024 ** 2, maxFileSize: 1024 ** 3, maxMemory: 4 * 1024 ** 3, maxAddressSpace: 0, maxCpuSeconds: 600 },
  bashTasks: { maxPerCaller: 4, maxTotal: 32, maxOutputBytes: 64 * 1024 ** 2, maxLifetimeMs: 4 * 3_600_000, retentionMs: 3_600_000 },
  callTasks: { maxPerCaller: 8, maxTotal: 256, maxKeptPerCaller: 32, ttlMs: 3_600_000, pollIntervalMs: 1_000 },
  docs: true,
  apiKeys: [],
  apiKeysFile: undefined,
  publicDocs: false,
  allowUnauthenticated: false,
  rateLimit: 600,
  redisUrl: undefined,
  maxConcurrency: 16,
  queueSize: 64,
  maxConcurrencyPerCaller: undefined,
  queuePerCaller: undefined,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 72_000,
  idleTimeoutMs: 30_000,
  maxConnections: undefined,
  allowedHosts: [],
  allowedOrigins: [],
  corsOrigins: [],
  trustProxy: false,
};

/** Asserts that loading `env` throws a ConfigError naming `variable`, with exactly this message. */
function assertRejected(env: Record<string, string>, variable: string, message: string): void {
  assert.throws(
    () => loadConfig(env, CWD),
    (err: unknown) => {
      assert.ok(err instanceof ConfigError, `expected ConfigError, got ${String(err)}`);
      assert.equal(err.name, 'ConfigError');
      assert.equal(err.variable, variable);
      assert.equal(err.message, message);
      return true;
    },
  );
}

describe('loadConfig', () => {
  test('gives the defaults for an empty environment', () => {
    assert.deepEqual(loadConfig({}, CWD), DEFAULTS);
  });

  test('treats empty and blank variables as unset', () => {
    const env = { PORT: '', HOST: '  ', LOG_LEVEL: '', TOOLPORT_TOOLS: ' ', TOOLPORT_PLUGINS: '', TOOLPORT_BASH_SANDBOX: '', TOOLPORT_WORKSPACE: '' };
    assert.deepEqual(loadConfig(env, CWD), DEFAULTS);
  });

  test('the working directory is the workspace by default, but never / or the home directory itself; set explicitly, / is taken', () => {
    assert.equal(loadConfig({ HOME: '/home/ada' }, '/home/ada/project').workspace, '/home/ada/project');
    const refused = (cwd: string, what: string): string =>
      `TOOLPORT_WORKSPACE is not set, and the working directory ${cwd} is ${what}, which toolport does not take as its workspace by default: set TOOLPORT_WORKSPACE (or pass --workspace) to the directory the tools may work in.`;
    assert.throws(() => loadConfig({}, '/'), { name: 'ConfigError', variable: 'TOOLPORT_WORKSPACE', message: refused('/', 'the root of the file system') });
    assert.throws(() => loadConfig({ HOME: '/home/ada/' }, '/home/ada'), { name: 'ConfigError', message: refused('/home/ada', 'the home directory') });
    assert.equal(loadConfig({ TOOLPORT_WORKSPACE: '/' }, '/').workspace, '/');
    assert.equal(workspaceWarning({ workspace: '/' }), "TOOLPORT_WORKSPACE is /: the file tools and Bash may touch every file the server's user can");
    assert.equal(workspaceWarning({ workspace: '/srv/work' }), undefined);
  });

  test('ignores variables it does not know', () => {
    assert.deepEqual(loadConfig({ PATH: '/usr/bin', TOOLPORT_UNKNOWN: 'x' }, CWD), DEFAULTS);
  });

  test('parses every variable', () => {
    const env = {
      PORT: '8080',
      HOST: '0.0.0.0',
      LOG_LEVEL: 'debug',
      TOOLPORT_TOOLS: 'Read, Echo ,Bash',
      TOOLPORT_TOOL_TIMEOUT_MS: '1500',
      TOOLPORT_BODY_LIMIT: '2048',
      TOOLPORT_PLUGINS: './plugins/a.js,@acme/toolport-tools',
      TOOLPORT_UPSTREAMS: 'upstreams.json',
      TOOLPORT_UPSTREAMS_LOCK: '/etc/toolport/toolport.lock.json',
      TOOLPORT_UPSTREAM_SANDBOX: 'true',
      TOOLPORT_UPSTREAM_MAX_PROCESSES: '64',
      TOOLPORT_UPSTREAM_MAX_MEMORY: '1G',
      TOOLPORT_UPSTREAM_TMP_SIZE: '0',
      TOOLPORT_SHUTDOWN_GRACE_MS: '0',
      TOOLPORT_WORKSPACE: '/data/work',
      TOOLPORT_WORKSPACE_QUOTA: '512M',
      TOOLPORT_BASH_SANDBOX: 'true',
      TOOLPORT_BASH_NETWORK: 'all',
      TOOLPORT_BASH_MAX_PROCESSES: '64',
      TOOLPORT_BASH_TMP_SIZE: '1048576',
      TOOLPORT_BASH_MAX_FILE_SIZE: '0',
      TOOLPORT_BASH_MAX_MEMORY: '536870912',
      TOOLPORT_BASH_MAX_ADDRESS_SPACE: '2147483648',
      TOOLPORT_BASH_MAX_CPU_SECONDS: '30',
      TOOLPORT_BASH_TASKS_PER_CALLER: '2',
      TOOLPORT_BASH_TASKS_MAX: '10',
      TOOLPORT_BASH_TASK_MAX_OUTPUT: '1048576',
      TOOLPORT_BASH_TASK_MAX_LIFETIME_MS: '60000',
      TOOLPORT_BASH_TASK_RETENTION_MS: '0',
      TOOLPORT_TASKS_PER_CALLER: '1',
      TOOLPORT_TASKS_MAX: '3',
      TOOLPORT_TASKS_KEPT_PER_CALLER: '5',
      TOOLPORT_TASK_TTL_MS: '60000',
      TOOLPORT_TASK_POLL_INTERVAL_MS: '250',
      TOOLPORT_DOCS: 'false',
      TOOLPORT_API_KEYS: 'key-one, key-two',
      TOOLPORT_API_KEYS_FILE: '/etc/toolport/keys.json',
      TOOLPORT_PUBLIC_DOCS: 'yes',
      TOOLPORT_ALLOW_UNAUTHENTICATED: '1',
      TOOLPORT_RATE_LIMIT: '0',
      TOOLPORT_REDIS_URL: 'redis://redis.toolport.svc:6379/2',
      TOOLPORT_MAX_CONCURRENCY: '4',
      TOOLPORT_QUEUE_SIZE: '0',
      TOOLPORT_MAX_CONCURRENCY_PER_CALLER: '2',
      TOOLPORT_QUEUE_PER_CALLER: '0',
      TOOLPORT_HEADERS_TIMEOUT_MS: '2000',
      TOOLPORT_REQUEST_TIMEOUT_MS: '5000',
      TOOLPORT_KEEP_ALIVE_TIMEOUT_MS: '61000',
      TOOLPORT_IDLE_TIMEOUT_MS: '15000',
      TOOLPORT_MAX_CONNECTIONS: '500',
      TOOLPORT_ALLOWED_HOSTS: 'Toolport.Example.com, 10.0.0.5,[::1]',
      TOOLPORT_ALLOWED_ORIGINS: 'https://App.Example.com:443/, http://localhost:5173',
      TOOLPORT_CORS_ORIGINS: 'https://WebUI.example.com, http://localhost:8080/',
      TOOLPORT_TRUST_PROXY: '10.0.0.0/8, loopback,fd00::1/64,192.168.1.1',
    };
    assert.deepEqual(loadConfig(env, CWD), {
      port: 8080,
      host: '0.0.0.0',
      logLevel: 'debug',
      tools: ['Read', 'Echo', 'Bash'],
      toolTimeoutMs: 1500,
      bodyLimit: 2048,
      plugins: ['./plugins/a.js', '@acme/toolport-tools'],
      upstreams: 'upstreams.json',
      upstreamsLock: '/etc/toolport/toolport.lock.json',
      upstreamSandbox: 'true',
      upstreamLimits: { maxProcesses: 64, maxMemory: 1024 ** 3, tmpSize: 0 },
      shutdownGraceMs: 0,
      workspace: '/data/work',
      workspaceQuota: 512 * 1024 ** 2,
      bashSandbox: true,
      bashNetwork: true,
      bashLimits: { maxProcesses: 64, tmpSize: 1024 ** 2, maxFileSize: 0, maxMemory: 512 * 1024 ** 2, maxAddressSpace: 2 * 1024 ** 3, maxCpuSeconds: 30 },
      bashTasks: { maxPerCaller: 2, maxTotal: 10, maxOutputBytes: 1024 ** 2, maxLifetimeMs: 60_000, retentionMs: 0 },
      callTasks: { maxPerCaller: 1, maxTotal: 3, maxKeptPerCaller: 5, ttlMs: 60_000, pollIntervalMs: 250 },
      docs: false,
      apiKeys: ['key-one', 'key-two'],
      apiKeysFile: '/etc/toolport/keys.json',
      publicDocs: true,
      allowUnauthenticated: true,
      rateLimit: 0,
      redisUrl: 'redis://redis.toolport.svc:6379/2',
      maxConcurrency: 4,
      queueSize: 0,
      maxConcurrencyPerCaller: 2,
      queuePerCaller: 0,
      headersTimeoutMs: 2000,
      requestTimeoutMs: 5000,
      keepAliveTimeoutMs: 61_000,
      idleTimeoutMs: 15_000,
      maxConnections: 500,
      allowedHosts: ['toolport.example.com', '10.0.0.5', '[::1]'],
      allowedOrigins: ['https://app.example.com', 'http://localhost:5173'],
      corsOrigins: ['https://webui.example.com', 'http://localhost:8080'],
      trustProxy: ['10.0.0.0/8', 'loopback', 'fd00::1/64', '192.168.1.1'],
    } satisfies Config);
  });

  test('TOOLPORT_WORKSPACE_QUOTA takes bytes, K, M, G and T (powers of 1024, either case), and 0 for no quota', () => {
    const quota = (value: string): number => loadConfig({ TOOLPORT_WORKSPACE_QUOTA: value }, CWD).workspaceQuota;
    assert.equal(quota('0'), 0);
    assert.equal(quota('1048576'), 1024 * 1024);
    assert.equal(quota('512k'), 512 * 1024);
    assert.equal(quota('2G'), 2 * 1024 ** 3);
    assert.equal(quota('1T'), 1024 ** 4);
  });

  test('TOOLPORT_CORS_ORIGINS refuses a wildcard when API keys are configured, by list or by file', () => {
    const message =
      'Invalid TOOLPORT_CORS_ORIGINS: expected exact web origins such as https://app.example.com, not a wildcard: with API keys configured, * would let any web page send calls with a key, got "*"';
    assertRejected({ TOOLPORT_CORS_ORIGINS: '*', TOOLPORT_API_KEYS: 'a-key-of-sixteen-chars' }, 'TOOLPORT_CORS_ORIGINS', message);
    assertRejected({ TOOLPORT_CORS_ORIGINS: '*', TOOLPORT_API_KEYS_FILE: '/etc/toolport/keys.json' }, 'TOOLPORT_CORS_ORIGINS', message);
    assert.deepEqual(loadConfig({ TOOLPORT_CORS_ORIGINS: 'https://webui.example.com', TOOLPORT_API_KEYS: 'a-key-of-sixteen-chars' }, CWD).corsOrigins, [
      'https://webui.example.com',
    ]);
  });

  test('TOOLPORT_REDIS_URL takes redis:// and rediss:// URLs with a database number', () => {
    for (const url of ['redis://localhost', 'redis://:secret@10.0.0.7:6380/0', 'rediss://user:secret@redis.example/15', 'redis://[::1]:6379']) {
      assert.equal(loadConfig({ TOOLPORT_REDIS_URL: url }, CWD).redisUrl, url);
    }
  });

  test('a bad TOOLPORT_REDIS_URL stops start-up without showing its password', () => {
    const expected = 'a URL such as redis://redis:6379 or rediss://:password@redis.example:6380/2 (a database number as the path)';
    for (const [value, shown] of [
      ['localhost:6379', 'localhost:6379'],
      ['http://redis:6379', 'http://redis:6379'],
      ['redis://:hunter2-secret@redis:6379/cache', 'redis://:***@redis:6379/cache'],
      ['redis://:hunter2-secret@redis:6379/?db=1', 'redis://:***@redis:6379/?db=1'],
      ['not a url :hunter2-secret@', '(hidden)'],
    ] as const) {
      assertRejected({ TOOLPORT_REDIS_URL: value }, 'TOOLPORT_REDIS_URL', `Invalid TOOLPORT_REDIS_URL: expected ${expected}, got ${JSON.stringify(shown)}`);
    }
  });

  test('accepts the ends of each integer range', () => {
    const low = loadConfig({ PORT: '0', TOOLPORT_TOOL_TIMEOUT_MS: '1', TOOLPORT_BODY_LIMIT: '1', TOOLPORT_SHUTDOWN_GRACE_MS: '0' }, CWD);
    assert.deepEqual([low.port, low.toolTimeoutMs, low.bodyLimit, low.shutdownGraceMs], [0, 1, 1, 0]);
    const high = loadConfig(
      { PORT: '65535', TOOLPORT_TOOL_TIMEOUT_MS: '2147483647', TOOLPORT_BODY_LIMIT: String(1024 ** 3), TOOLPORT_SHUTDOWN_GRACE_MS: '600000' },
      CWD,
    );
    assert.deepEqual([high.port, high.toolTimeoutMs, high.bodyLimit, high.shutdownGraceMs], [65535, 2_147_483_647, 1024 ** 3, 600_000]);
  });

  for (const [value, expected] of [
    ['true', true],
    ['FALSE', false],
    ['0', 0],
    ['2', 2],
    ['127.0.0.1', ['127.0.0.1']],
    ['uniquelocal, linklocal', ['uniquelocal', 'linklocal']],
  ] as const) {
    test(`reads TOOLPORT_TRUST_PROXY=${value}`, () => {
      assert.deepEqual(loadConfig({ TOOLPORT_TRUST_PROXY: value }, CWD).trustProxy, expected);
    });
  }

  test('the header timeout defaults to the request timeout when that is shorter than 10 s', () => {
    const config = loadConfig({ TOOLPORT_REQUEST_TIMEOUT_MS: '4000' }, CWD);
    assert.deepEqual([config.requestTimeoutMs, config.headersTimeoutMs], [4000, 4000]);
  });

  test('trims whitespace around values', () => {
    const config = loadConfig({ PORT: ' 4000 ', LOG_LEVEL: ' warn ', HOST: ' localhost ' }, CWD);
    assert.deepEqual([config.port, config.logLevel, config.host], [4000, 'warn', 'localhost']);
  });

  for (const level of ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const) {
    test(`accepts LOG_LEVEL=${level}`, () => {
      assert.equal(loadConfig({ LOG_LEVEL: level }, CWD).logLevel, level);
    });
  }

  for (const [value, expected] of [
    ['true', true],
    ['1', true],
    ['yes', true],
    ['TRUE', true],
    ['Yes', true],
    ['false', false],
    ['0', false],
    ['no', false],
    ['FALSE', false],
  ] as const) {
    test(`reads TOOLPORT_BASH_SANDBOX=${value} and TOOLPORT_DOCS=${value} as ${String(expected)}`, () => {
      const config = loadConfig({ TOOLPORT_BASH_SANDBOX: value, TOOLPORT_DOCS: value }, CWD);
      assert.deepEqual([config.bashSandbox, config.docs], [expected, expected]);
    });
  }

  test('reads TOOLPORT_BASH_SANDBOX=bubblewrap and =landlock as the sandbox they name, in any case', () => {
    assert.equal(loadConfig({ TOOLPORT_BASH_SANDBOX: 'Landlock' }, CWD).bashSandbox, 'landlock');
    assert.equal(loadConfig({ TOOLPORT_BASH_SANDBOX: 'bubblewrap' }, CWD).bashSandbox, 'bubblewrap');
  });

  test('reads TOOLPORT_BASH_NETWORK as no network unless it says all', () => {
    assert.equal(loadConfig({}, CWD).bashNetwork, false);
    assert.equal(loadConfig({ TOOLPORT_BASH_NETWORK: 'none' }, CWD).bashNetwork, false);
    assert.equal(loadConfig({ TOOLPORT_BASH_NETWORK: 'all' }, CWD).bashNetwork, true);
  });

  test('reads TOOLPORT_BASH_SANDBOX=auto in any case as auto, the default when it is unset or empty', () => {
    for (const value of ['auto', 'AUTO', ' Auto ', '', undefined]) {
      assert.equal(loadConfig({ TOOLPORT_BASH_SANDBOX: value }, CWD).bashSandbox, 'auto', String(value));
    }
  });
});

describe('loadConfig rejects with a ConfigError naming the variable', () => {
  const cases: [string, string, string][] = [
    ['PORT', 'abc', 'Invalid PORT: expected an integer from 0 to 65535, got "abc"'],
    ['PORT', '70000', 'Invalid PORT: expected an integer from 0 to 65535, got "70000"'],
    ['PORT', '-1', 'Invalid PORT: expected an integer from 0 to 65535, got "-1"'],
    ['PORT', '80.5', 'Invalid PORT: expected an integer from 0 to 65535, got "80.5"'],
    ['PORT', '1e3', 'Invalid PORT: expected an integer from 0 to 65535, got "1e3"'],
    ['LOG_LEVEL', 'loud', 'Invalid LOG_LEVEL: expected one of fatal, error, warn, info, debug, trace, silent, got "loud"'],
    ['LOG_LEVEL', 'INFO', 'Invalid LOG_LEVEL: expected one of fatal, error, warn, info, debug, trace, silent, got "INFO"'],
    ['TOOLPORT_TOOL_TIMEOUT_MS', '0', 'Invalid TOOLPORT_TOOL_TIMEOUT_MS: expected an integer from 1 to 2147483647, got "0"'],
    ['TOOLPORT_TOOL_TIMEOUT_MS', '2147483648', 'Invalid TOOLPORT_TOOL_TIMEOUT_MS: expected an integer from 1 to 2147483647, got "2147483648"'],
    ['TOOLPORT_BODY_LIMIT', '-1', 'Invalid TOOLPORT_BODY_LIMIT: expected an integer from 1 to 1073741824, got "-1"'],
    ['TOOLPORT_BODY_LIMIT', '1mb', 'Invalid TOOLPORT_BODY_LIMIT: expected an integer from 1 to 1073741824, got "1mb"'],
    ['TOOLPORT_SHUTDOWN_GRACE_MS', '600001', 'Invalid TOOLPORT_SHUTDOWN_GRACE_MS: expected an integer from 0 to 600000, got "600001"'],
    ['TOOLPORT_TOOLS', 'a,,b', 'Invalid TOOLPORT_TOOLS: expected a comma-separated list without empty items, got "a,,b"'],
    ['TOOLPORT_TOOLS', 'a,', 'Invalid TOOLPORT_TOOLS: expected a comma-separated list without empty items, got "a,"'],
    ['TOOLPORT_PLUGINS', './a.js, ,./b.js', 'Invalid TOOLPORT_PLUGINS: expected a comma-separated list without empty items, got "./a.js, ,./b.js"'],
    ['TOOLPORT_BASH_SANDBOX', 'maybe', 'Invalid TOOLPORT_BASH_SANDBOX: expected auto, true, false, bubblewrap or landlock, got "maybe"'],
    ['TOOLPORT_BASH_NETWORK', 'loopback', 'Invalid TOOLPORT_BASH_NETWORK: expected one of none, all, got "loopback"'],
    ['TOOLPORT_UPSTREAM_SANDBOX', 'landlock', 'Invalid TOOLPORT_UPSTREAM_SANDBOX: expected one of auto, true, false, got "landlock"'],
    ['TOOLPORT_DOCS', 'on', 'Invalid TOOLPORT_DOCS: expected true or false, got "on"'],
    ['TOOLPORT_BASH_MAX_PROCESSES', '-1', 'Invalid TOOLPORT_BASH_MAX_PROCESSES: expected an integer from 0 to 1000000, got "-1"'],
    ['TOOLPORT_BASH_TMP_SIZE', '128M', 'Invalid TOOLPORT_BASH_TMP_SIZE: expected an integer from 0 to 1125899906842624, got "128M"'],
    ['TOOLPORT_BASH_MAX_FILE_SIZE', '1.5', 'Invalid TOOLPORT_BASH_MAX_FILE_SIZE: expected an integer from 0 to 1125899906842624, got "1.5"'],
    ['TOOLPORT_BASH_MAX_MEMORY', 'lots', 'Invalid TOOLPORT_BASH_MAX_MEMORY: expected an integer from 0 to 1125899906842624, got "lots"'],
    [
      'TOOLPORT_BASH_MAX_ADDRESS_SPACE',
      '1125899906842625',
      'Invalid TOOLPORT_BASH_MAX_ADDRESS_SPACE: expected an integer from 0 to 1125899906842624, got "1125899906842625"',
    ],
    ['TOOLPORT_BASH_MAX_CPU_SECONDS', '86401', 'Invalid TOOLPORT_BASH_MAX_CPU_SECONDS: expected an integer from 0 to 86400, got "86401"'],
    ['TOOLPORT_BASH_TASKS_PER_CALLER', '-1', 'Invalid TOOLPORT_BASH_TASKS_PER_CALLER: expected an integer from 0 to 10000, got "-1"'],
    ['TOOLPORT_BASH_TASKS_MAX', 'many', 'Invalid TOOLPORT_BASH_TASKS_MAX: expected an integer from 0 to 100000, got "many"'],
    ['TOOLPORT_BASH_TASK_MAX_OUTPUT', '100', 'Invalid TOOLPORT_BASH_TASK_MAX_OUTPUT: expected an integer from 1024 to 1125899906842624, got "100"'],
    ['TOOLPORT_BASH_TASK_MAX_LIFETIME_MS', '0', 'Invalid TOOLPORT_BASH_TASK_MAX_LIFETIME_MS: expected an integer from 1000 to 604800000, got "0"'],
    ['TOOLPORT_TASKS_PER_CALLER', '-1', 'Invalid TOOLPORT_TASKS_PER_CALLER: expected an integer from 0 to 10000, got "-1"'],
    ['TOOLPORT_TASK_TTL_MS', '10', 'Invalid TOOLPORT_TASK_TTL_MS: expected an integer from 1000 to 604800000, got "10"'],
    ['TOOLPORT_BASH_TASK_RETENTION_MS', '1.5', 'Invalid TOOLPORT_BASH_TASK_RETENTION_MS: expected an integer from 0 to 604800000, got "1.5"'],
    ['TOOLPORT_API_KEYS', 'sk-secret,,other', 'Invalid TOOLPORT_API_KEYS: expected a comma-separated list without empty items, got "(hidden)"'],
    ['TOOLPORT_RATE_LIMIT', '-5', 'Invalid TOOLPORT_RATE_LIMIT: expected an integer from 0 to 1000000, got "-5"'],
    ['TOOLPORT_MAX_CONCURRENCY', '0', 'Invalid TOOLPORT_MAX_CONCURRENCY: expected an integer from 1 to 10000, got "0"'],
    ['TOOLPORT_MAX_CONCURRENCY_PER_CALLER', '0', 'Invalid TOOLPORT_MAX_CONCURRENCY_PER_CALLER: expected an integer from 1 to 10000, got "0"'],
    ['TOOLPORT_QUEUE_PER_CALLER', '-1', 'Invalid TOOLPORT_QUEUE_PER_CALLER: expected an integer from 0 to 100000, got "-1"'],
    ['TOOLPORT_QUEUE_SIZE', 'lots', 'Invalid TOOLPORT_QUEUE_SIZE: expected an integer from 0 to 100000, got "lots"'],
    ...['2GB', '-1', '1.5G', '10 G', 'lots', '9999999999999999'].map((size): [string, string, string] => [
      'TOOLPORT_WORKSPACE_QUOTA',
      size,
      `Invalid TOOLPORT_WORKSPACE_QUOTA: expected a size in bytes, optionally with K, M, G or T (powers of 1024), such as 10G; 0 for no quota, got ${JSON.stringify(size)}`,
    ]),
    ['TOOLPORT_ALLOW_UNAUTHENTICATED', 'sure', 'Invalid TOOLPORT_ALLOW_UNAUTHENTICATED: expected true or false, got "sure"'],
    ['TOOLPORT_PUBLIC_DOCS', 'maybe', 'Invalid TOOLPORT_PUBLIC_DOCS: expected true or false, got "maybe"'],
    ['TOOLPORT_REQUEST_TIMEOUT_MS', '0', 'Invalid TOOLPORT_REQUEST_TIMEOUT_MS: expected an integer from 1 to 3600000, got "0"'],
    ['TOOLPORT_HEADERS_TIMEOUT_MS', '30001', 'Invalid TOOLPORT_HEADERS_TIMEOUT_MS: expected at most TOOLPORT_REQUEST_TIMEOUT_MS (30000), got "30001"'],
    ['TOOLPORT_HEADERS_TIMEOUT_MS', '10s', 'Invalid TOOLPORT_HEADERS_TIMEOUT_MS: expected an integer from 1 to 3600000, got "10s"'],
    ['TOOLPORT_KEEP_ALIVE_TIMEOUT_MS', '3600001', 'Invalid TOOLPORT_KEEP_ALIVE_TIMEOUT_MS: expected an integer from 1 to 3600000, got "3600001"'],
    ['TOOLPORT_IDLE_TIMEOUT_MS', '0', 'Invalid TOOLPORT_IDLE_TIMEOUT_MS: expected an integer from 1 to 3600000, got "0"'],
    ['TOOLPORT_MAX_CONNECTIONS', '0', 'Invalid TOOLPORT_MAX_CONNECTIONS: expected an integer from 1 to 1000000, got "0"'],
    ['TOOLPORT_MAX_CONNECTIONS', 'many', 'Invalid TOOLPORT_MAX_CONNECTIONS: expected an integer from 1 to 1000000, got "many"'],
    [
      'TOOLPORT_ALLOWED_HOSTS',
      'a.example,,b.example',
      'Invalid TOOLPORT_ALLOWED_HOSTS: expected a comma-separated list without empty items, got "a.example,,b.example"',
    ],
    [
      'TOOLPORT_ALLOWED_HOSTS',
      'a.example, toolport.example.com:8443',
      'Invalid TOOLPORT_ALLOWED_HOSTS: expected a comma-separated list of host names or IP addresses, without scheme or port, got "toolport.example.com:8443"',
    ],
    [
      'TOOLPORT_ALLOWED_HOSTS',
      'https://toolport.example.com',
      'Invalid TOOLPORT_ALLOWED_HOSTS: expected a comma-separated list of host names or IP addresses, without scheme or port, got "https://toolport.example.com"',
    ],
    [
      'TOOLPORT_ALLOWED_HOSTS',
      '*.example.com',
      'Invalid TOOLPORT_ALLOWED_HOSTS: expected a comma-separated list of host names or IP addresses, without scheme or port, got "*.example.com"',
    ],
    [
      'TOOLPORT_ALLOWED_HOSTS',
      '::1',
      'Invalid TOOLPORT_ALLOWED_HOSTS: expected a comma-separated list of host names or IP addresses, without scheme or port, got "::1"',
    ],
    [
      'TOOLPORT_ALLOWED_HOSTS',
      '[fe80::zz]',
      'Invalid TOOLPORT_ALLOWED_HOSTS: expected a comma-separated list of host names or IP addresses, without scheme or port, got "[fe80::zz]"',
    ],
    ...[
      'null',
      'app.example.com',
      'https://app.example.com/app',
      'https://app.example.com?x=1',
      'ftp://app.example.com',
      'https://user@app.example.com',
      '*',
      'https://*.example.com',
    ].map((origin): [string, string, string] => [
      'TOOLPORT_ALLOWED_ORIGINS',
      origin,
      `Invalid TOOLPORT_ALLOWED_ORIGINS: expected a comma-separated list of web origins such as https://app.example.com (http or https, a host, an optional port, no path), got ${JSON.stringify(origin)}`,
    ]),
    ...['null', 'https://app.example.com/app', 'app.example.com', 'https://*.example.com'].map((origin): [string, string, string] => [
      'TOOLPORT_CORS_ORIGINS',
      origin,
      `Invalid TOOLPORT_CORS_ORIGINS: expected a comma-separated list of exact web origins such as https://app.example.com (http or https, a host, an optional port, no path), got ${JSON.stringify(origin)}`,
    ]),
    [
      'TOOLPORT_CORS_ORIGINS',
      'https://app.example.com, *',
      'Invalid TOOLPORT_CORS_ORIGINS: expected exact web origins such as https://app.example.com, not a wildcard: without API keys, * would let any web page the user opens run the tools, got "https://app.example.com, *"',
    ],
    ...['yes', '10.0.0.0/33', '::1/129', '10.0.0.0/8/1', 'proxy.example.com', '10.0.0.1,,10.0.0.2', '-1', '1000'].map((value): [string, string, string] => [
      'TOOLPORT_TRUST_PROXY',
      value,
      `Invalid TOOLPORT_TRUST_PROXY: expected true, false, a hop count, or a comma-separated list of IP addresses and CIDR ranges, got ${JSON.stringify(value)}`,
    ]),
  ];
  for (const [variable, value, message] of cases) {
    test(`${variable}=${value}`, () => assertRejected({ [variable]: value }, variable, message));
  }

  test('the header timeout must fit within a request timeout that is set too', () => {
    assertRejected(
      { TOOLPORT_REQUEST_TIMEOUT_MS: '5000', TOOLPORT_HEADERS_TIMEOUT_MS: '6000' },
      'TOOLPORT_HEADERS_TIMEOUT_MS',
      'Invalid TOOLPORT_HEADERS_TIMEOUT_MS: expected at most TOOLPORT_REQUEST_TIMEOUT_MS (5000), got "6000"',
    );
  });

  test('the first bad variable, in reading order, when several are bad', () => {
    assertRejected({ LOG_LEVEL: 'loud', PORT: 'abc' }, 'PORT', 'Invalid PORT: expected an integer from 0 to 65535, got "abc"');
  });
});
