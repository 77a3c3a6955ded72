import { byteSizeSetting, code, groupSetting, integerSetting, oneOfSetting, textSetting } from '../variables.js';

const ISOLATION = 'upstreams.md#isolation';

/** The upstream MCP servers whose tools toolport serves too, and what each stdio one may take. */
export const UPSTREAMS = {
  upstreams: textSetting({
    name: 'TOOLPORT_UPSTREAMS',
    shown: 'none',
    meaning: 'a JSON file with an `mcpServers` object (the shape Claude Desktop, Claude Code and Cursor use): MCP servers whose tools toolport serves too',
    see: 'upstreams.md',
  }),
  upstreamsLock: textSetting({
    name: 'TOOLPORT_UPSTREAMS_LOCK',
    shown: '`toolport.lock.json` beside the upstreams file',
    meaning: 'the lock file of pinned upstream tool definitions (`toolport upstreams lock`); when it exists, a changed or new definition is not served',
    see: 'upstreams.md#pinned-definitions',
  }),
  upstreamSandbox: oneOfSetting({
    name: 'TOOLPORT_UPSTREAM_SANDBOX',
    values: ['auto', 'true', 'false'],
    fallback: 'auto',
    meaning:
      'run stdio upstreams under Landlock and seccomp: `auto`, where it works here (else unconfined under the reaper supervisor, with a warning); `true`, always (start-up fails without); `false`, never',
    see: ISOLATION,
  }),
  upstreamLimits: groupSetting({
    maxProcesses: integerSetting({
      name: 'TOOLPORT_UPSTREAM_MAX_PROCESSES',
      fallback: 512,
      min: 0,
      max: 1_000_000,
      meaning: 'processes and threads one stdio upstream may have at once, counted every second; past it the upstream is stopped and restarted; `0`: no limit',
      see: ISOLATION,
    }),
    maxMemory: byteSizeSetting({
      name: 'TOOLPORT_UPSTREAM_MAX_MEMORY',
      fallback: 4 * 1024 ** 3,
      shown: code('4G'),
      meaning: 'resident memory of one stdio upstream and what it started, counted as the processes are; `0`: no limit',
      see: ISOLATION,
    }),
    tmpSize: byteSizeSetting({
      name: 'TOOLPORT_UPSTREAM_TMP_SIZE',
      fallback: 1024 ** 3,
      shown: code('1G'),
      meaning: "bytes one stdio upstream's private TMPDIR may hold (in the sandbox only); `0`: no limit",
      see: ISOLATION,
    }),
  }),
} as const;
