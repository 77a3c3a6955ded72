import { DEFAULT_TOOL_TIMEOUT_MS } from '../../core/executor.js';
import { DEFAULT_MAX_CONCURRENCY, DEFAULT_QUEUE_SIZE } from '../../core/limiter.js';
import { redisUrl } from '../parse.js';
import { DEFAULT_CALL_TASK_BOUNDS } from '../../core/call-task.js';
import { groupSetting, integerSetting, optionalIntegerSetting, setting } from '../variables.js';

const MORE = 'operations.md#limits-and-metrics';
const TASKS = 'rest-api.md#tasks';
const t = DEFAULT_CALL_TASK_BOUNDS;

/**
 * How many calls run and wait, for how long, and how often a caller may ask. The four admission
 * fields keep the names of the executor's options (`CallLimits`), which take this section as it is.
 */
export const LIMITS = {
  toolTimeoutMs: integerSetting({
    name: 'TOOLPORT_TOOL_TIMEOUT_MS',
    fallback: DEFAULT_TOOL_TIMEOUT_MS,
    min: 1,
    max: 2_147_483_647,
    meaning: 'deadline of a call, for tools that declare no `timeoutMs` of their own',
  }),
  shutdownGraceMs: integerSetting({
    name: 'TOOLPORT_SHUTDOWN_GRACE_MS',
    fallback: 10_000,
    min: 0,
    max: 600_000,
    meaning: 'how long calls in flight may run on after SIGTERM before they are aborted',
    see: 'operations.md#signals-and-shutdown',
  }),
  rateLimit: integerSetting({
    name: 'TOOLPORT_RATE_LIMIT',
    fallback: 600,
    min: 0,
    max: 1_000_000,
    meaning: 'requests per minute per API key (per client address without keys); `0` switches it off',
    see: MORE,
  }),
  redisUrl: setting(
    {
      name: 'TOOLPORT_REDIS_URL',
      default: 'none',
      meaning:
        'keep the rate-limit counts in this Redis (`redis://[:password@]host[:port][/db]`, `rediss://` for TLS), shared by every replica, and pass MCP cancellations between replicas through it; without it each process counts alone and a cancellation reaches its own process only',
      see: 'deployment.md#running-many-replicas',
    },
    (env) => redisUrl(env, 'TOOLPORT_REDIS_URL'),
  ),
  maxConcurrency: integerSetting({
    name: 'TOOLPORT_MAX_CONCURRENCY',
    fallback: DEFAULT_MAX_CONCURRENCY,
    min: 1,
    max: 10_000,
    meaning: 'most calls of any one tool that run at once (a tool may set a lower `maxConcurrency`; Bash: 4)',
    see: MORE,
  }),
  queueSize: integerSetting({
    name: 'TOOLPORT_QUEUE_SIZE',
    fallback: DEFAULT_QUEUE_SIZE,
    min: 0,
    max: 100_000,
    meaning: 'most calls of one tool that wait for a slot; past it, 503 `QUEUE_FULL` (`0`: no waiting)',
    see: MORE,
  }),
  maxConcurrencyPerCaller: optionalIntegerSetting({
    name: 'TOOLPORT_MAX_CONCURRENCY_PER_CALLER',
    shown: "half of each tool's slots, rounded up",
    min: 1,
    max: 10_000,
    meaning: 'most calls of one API key (client address without keys) that run at once, per tool',
    see: MORE,
  }),
  queuePerCaller: optionalIntegerSetting({
    name: 'TOOLPORT_QUEUE_PER_CALLER',
    shown: 'a quarter of `TOOLPORT_QUEUE_SIZE`, rounded up',
    min: 0,
    max: 100_000,
    meaning: 'most calls of one API key (client address) that wait for a slot, per tool; past it, 503 `QUEUE_FULL`',
    see: MORE,
  }),
  // Calls run as tasks (REST's `Prefer: respond-async`, MCP's tasks): how many work, how many and how long finished ones are kept.
  callTasks: groupSetting({
    maxPerCaller: integerSetting({
      name: 'TOOLPORT_TASKS_PER_CALLER',
      fallback: t.maxPerCaller,
      min: 0,
      max: 10_000,
      meaning: 'tool calls one caller (an API key) may have working as tasks at once; past it, 429 `TOO_MANY_TASKS`; `0`: no tasks',
      see: TASKS,
    }),
    maxTotal: integerSetting({
      name: 'TOOLPORT_TASKS_MAX',
      fallback: t.maxTotal,
      min: 0,
      max: 100_000,
      meaning: 'tool calls all callers together may have working as tasks at once; past it, 503 `TASKS_FULL`',
      see: TASKS,
    }),
    maxKeptPerCaller: integerSetting({
      name: 'TOOLPORT_TASKS_KEPT_PER_CALLER',
      fallback: t.maxKeptPerCaller,
      min: 1,
      max: 10_000,
      meaning: 'finished tasks (with their results) kept per caller; the oldest is forgotten first',
      see: TASKS,
    }),
    ttlMs: integerSetting({
      name: 'TOOLPORT_TASK_TTL_MS',
      fallback: t.ttlMs,
      min: 1_000,
      max: 7 * 86_400_000,
      meaning: 'milliseconds a finished task and its result are kept before it is forgotten',
      see: TASKS,
    }),
    pollIntervalMs: integerSetting({
      name: 'TOOLPORT_TASK_POLL_INTERVAL_MS',
      fallback: t.pollIntervalMs,
      min: 10,
      max: 600_000,
      meaning: 'how often clients are told to ask about a working task (`pollIntervalMs`)',
      see: TASKS,
    }),
  }),
} as const;
