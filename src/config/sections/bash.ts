import type { BashSandboxSetting } from '../../os/sandbox/isolation.js';
import { DEFAULT_BASH_LIMITS } from '../../os/sandbox/limits.js';
import { DEFAULT_TASK_BOUNDS } from '../../core/background.js';
import { ConfigError, raw, type Env } from '../parse.js';
import { groupSetting, integerSetting, mapped, oneOfSetting, setting } from '../variables.js';

const MAX_BYTES = 1024 ** 5;
const d = DEFAULT_BASH_LIMITS;
const LIMITS = 'security.md#what-one-bash-call-may-take';
const t = DEFAULT_TASK_BOUNDS;
const TASKS = 'tools.md#background-tasks';

/** Where and how Bash runs: the sandbox, its network, and what one call may take. */
export const BASH = {
  bashSandbox: setting(
    {
      name: 'TOOLPORT_BASH_SANDBOX',
      default: '`auto`',
      meaning:
        'run Bash in a sandbox: `auto`, the first that works here (bubblewrap, then Landlock and seccomp); `true`, one of them always (start-up fails without); `bubblewrap` or `landlock`, that one always; `false`, never',
      see: 'security.md#where-bash-is-isolated',
    },
    (env) => sandboxSetting(env, 'TOOLPORT_BASH_SANDBOX'),
  ),
  bashNetwork: mapped(
    oneOfSetting({
      name: 'TOOLPORT_BASH_NETWORK',
      values: ['none', 'all'],
      fallback: 'none',
      meaning: 'what a sandboxed Bash command may reach on the network: `none`, or `all` (whatever the server can reach)',
      see: 'security.md#where-bash-is-isolated',
    }),
    (network) => network === 'all',
  ),
  // Each bound an integer from 0 (off); sizes in bytes, up to a PiB; CPU seconds up to a day.
  bashLimits: groupSetting({
    maxProcesses: integerSetting({
      name: 'TOOLPORT_BASH_MAX_PROCESSES',
      fallback: d.maxProcesses,
      min: 0,
      max: 1_000_000,
      meaning: 'processes and threads one Bash call may have at once; `0`: no limit',
      see: LIMITS,
    }),
    maxMemory: integerSetting({
      name: 'TOOLPORT_BASH_MAX_MEMORY',
      fallback: d.maxMemory,
      min: 0,
      max: MAX_BYTES,
      meaning: 'bytes of memory one Bash call may use, where a memory cgroup can be made; `0`: no limit',
      see: LIMITS,
    }),
    maxAddressSpace: integerSetting({
      name: 'TOOLPORT_BASH_MAX_ADDRESS_SPACE',
      fallback: d.maxAddressSpace,
      min: 0,
      max: MAX_BYTES,
      meaning: 'bytes of address space each process of a Bash call may map (`RLIMIT_AS`); `0`: no limit',
      see: LIMITS,
    }),
    maxFileSize: integerSetting({
      name: 'TOOLPORT_BASH_MAX_FILE_SIZE',
      fallback: d.maxFileSize,
      min: 0,
      max: MAX_BYTES,
      meaning: 'largest file a Bash command may write, in bytes; `0`: no limit',
      see: LIMITS,
    }),
    maxCpuSeconds: integerSetting({
      name: 'TOOLPORT_BASH_MAX_CPU_SECONDS',
      fallback: d.maxCpuSeconds,
      min: 0,
      max: 86_400,
      meaning: 'CPU seconds each process of a Bash call may use, never more than its timeout; `0`: no limit',
      see: LIMITS,
    }),
    tmpSize: integerSetting({
      name: 'TOOLPORT_BASH_TMP_SIZE',
      fallback: d.tmpSize,
      min: 0,
      max: MAX_BYTES,
      meaning: "bytes the Bash sandbox's `/tmp` and `/dev/shm` each hold; `0`: half the RAM, as tmpfs does",
      see: LIMITS,
    }),
  }),
  // Bash's run_in_background: how many run, how much they print, how long they run and are kept.
  bashTasks: groupSetting({
    maxPerCaller: integerSetting({
      name: 'TOOLPORT_BASH_TASKS_PER_CALLER',
      fallback: t.maxPerCaller,
      min: 0,
      max: 10_000,
      meaning: 'background Bash tasks one caller (an API key) may have running at once; `0`: none',
      see: TASKS,
    }),
    maxTotal: integerSetting({
      name: 'TOOLPORT_BASH_TASKS_MAX',
      fallback: t.maxTotal,
      min: 0,
      max: 100_000,
      meaning: 'background Bash tasks all callers together may have running at once; `0`: none',
      see: TASKS,
    }),
    maxOutputBytes: integerSetting({
      name: 'TOOLPORT_BASH_TASK_MAX_OUTPUT',
      fallback: t.maxOutputBytes,
      min: 1024,
      max: MAX_BYTES,
      meaning: "bytes of output a background task's file takes; past it the file stops, with a note, and the task runs on",
      see: TASKS,
    }),
    maxLifetimeMs: integerSetting({
      name: 'TOOLPORT_BASH_TASK_MAX_LIFETIME_MS',
      fallback: t.maxLifetimeMs,
      min: 1_000,
      max: 7 * 86_400_000,
      meaning: 'milliseconds a background task may run before it is stopped (SIGTERM, then SIGKILL); its CPU time is bounded by it too',
      see: TASKS,
    }),
    retentionMs: integerSetting({
      name: 'TOOLPORT_BASH_TASK_RETENTION_MS',
      fallback: t.retentionMs,
      min: 0,
      max: 7 * 86_400_000,
      meaning: 'milliseconds a finished background task (its status and output file) is kept before it is forgotten',
      see: TASKS,
    }),
  }),
} as const;

function sandboxSetting(env: Env, name: string): BashSandboxSetting {
  const value = raw(env, name)?.toLowerCase();
  if (value === undefined || value === 'auto') return 'auto';
  if (['true', '1', 'yes'].includes(value)) return true;
  if (['false', '0', 'no'].includes(value)) return false;
  if (value === 'bubblewrap' || value === 'landlock') return value;
  throw new ConfigError(name, 'auto, true, false, bubblewrap or landlock', value);
}
