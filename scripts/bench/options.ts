import path from 'node:path';
import { parseArgs } from 'node:util';

/** The project's root, where `dist/`, `node_modules/` and `bench/` live. */
export const ROOT = path.resolve(import.meta.dirname, '../..');

/** What one run of `npm run bench` does; every figure can be set from the command line. */
export interface BenchOptions {
  /** One short round, for CI: only asserts that every path answered without errors. */
  quick: boolean;
  /** Where the results go as JSON. */
  out: string;
  /** Measured seconds per throughput slot (wrk -d). */
  durationS: number;
  /** Unmeasured seconds before each measured run, so the JIT has optimised the path (0: none). */
  warmUpS: number;
  /** wrk -c */
  connections: number;
  /** wrk -t */
  threads: number;
  /** Interleaved rounds; the table shows the median of each figure over them. */
  rounds: number;
  /** Sequential Bash calls measured per slot (after a tenth as many unmeasured). */
  bashCalls: number;
  /** Sequential upstream tools/call calls measured per slot (after as many unmeasured). */
  upstreamCalls: number;
  /** Cold starts of each kind per round. */
  starts: number;
  /** Keyed Echo calls the memory row drives one server through. */
  rssCalls: number;
  /** Skip the build (tsc and the server's bundle) and measure the `dist/` already there. */
  skipBuild: boolean;
  /** Run only the rows whose id or label contains one of these (case-insensitive); empty: every row. */
  only: string[];
}

const USAGE = `npm run bench [-- options]
  --quick             one round of about 1 s per slot; asserts only that every path answered
  --out FILE          results as JSON (default bench/results/latest.json; quick: bench/results/quick.json)
  --duration S        measured seconds per slot (default 10)
  --warm-up S         unmeasured seconds before each measured run (default 3)
  --connections N     wrk -c (default 50)
  --threads N         wrk -t (default 1)
  --rounds N          interleaved rounds (default 3)
  --bash-calls N      sequential Bash calls per slot (default 200)
  --upstream-calls N  sequential upstream tools/call calls per slot, after as many unmeasured
                      (default 1000)
  --starts N          cold starts of each kind per round (default 2)
  --rss-calls N       keyed Echo calls of the memory row, one server, once per run (default
                      10000000: about 17 minutes at 10,000 calls a second)
  --skip-build        measure the dist/ already built
  --only TEXT         only the row with this id, or else the rows whose id or label contains
                      TEXT; repeatable, or ids separated by commas (ids: get-tools,
                      get-tools-keyed, echo, echo-keyed, mcp-tools-list, mcp-tools-call, calls,
                      bash, bash-default, bash-spaced, bash-landlock, bash-landlock-spaced,
                      cold-start, mcp-stdio-start, upstream-stdio, upstream-http,
                      upstream-stdio-mcp, upstream-stdio-mcp-slow, upstream-http-slow,
                      echo-token, read-rules, echo-keyed-redis, tools-10, tools-100,
                      tools-1000, rss-keyed)`;

/** Reads the command line; throws with the usage on a bad flag or value. */
export function parseOptions(args: string[]): BenchOptions {
  let values;
  try {
    ({ values } = parseArgs({
      args,
      options: {
        quick: { type: 'boolean', default: false },
        out: { type: 'string' },
        duration: { type: 'string' },
        'warm-up': { type: 'string' },
        connections: { type: 'string', default: '50' },
        threads: { type: 'string', default: '1' },
        rounds: { type: 'string' },
        'bash-calls': { type: 'string' },
        'upstream-calls': { type: 'string' },
        starts: { type: 'string' },
        'rss-calls': { type: 'string' },
        'skip-build': { type: 'boolean', default: false },
        only: { type: 'string', multiple: true, default: [] },
        help: { type: 'boolean', default: false },
      },
    }));
  } catch (err) {
    throw new Error(`${(err as Error).message}\n${USAGE}`);
  }
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  const quick = values.quick;
  const options: BenchOptions = {
    quick,
    out: path.resolve(values.out ?? path.join(ROOT, 'bench/results', quick ? 'quick.json' : 'latest.json')),
    // wrk takes whole seconds.
    durationS: count('--duration', values.duration ?? (quick ? '1' : '10'), 1),
    warmUpS: count('--warm-up', values['warm-up'] ?? (quick ? '0' : '3'), 0),
    connections: count('--connections', values.connections, 1),
    threads: count('--threads', values.threads, 1),
    rounds: count('--rounds', values.rounds ?? (quick ? '1' : '3'), 1),
    bashCalls: count('--bash-calls', values['bash-calls'] ?? (quick ? '20' : '200'), 1),
    upstreamCalls: count('--upstream-calls', values['upstream-calls'] ?? (quick ? '20' : '1000'), 1),
    starts: count('--starts', values.starts ?? (quick ? '1' : '2'), 1),
    rssCalls: count('--rss-calls', values['rss-calls'] ?? (quick ? '2000' : '10000000'), 1),
    skipBuild: values['skip-build'],
    only: values.only.map((text) => text.toLowerCase()),
  };
  if (options.threads > options.connections) throw new Error('--threads must not exceed --connections (wrk gives each thread at least one connection)');
  return options;
}

/**
 * Whether a row is to run. Each `--only` text selects the row whose id it is, or the rows whose
 * ids it lists separated by commas, or else every row whose id or label contains it (labels hold
 * commas too, so a list counts as one only when every part is an id); no `--only`: every row.
 */
export function selected(options: Pick<BenchOptions, 'only'>, row: { id: string; label: string }, ids: readonly string[]): boolean {
  if (options.only.length === 0) return true;
  const haystack = `${row.id}\n${row.label}`.toLowerCase();
  return options.only.some((text) => {
    const parts = text.split(',').map((part) => part.trim());
    return parts.every((part) => ids.includes(part)) ? parts.includes(row.id) : haystack.includes(text);
  });
}

function count(flag: string, value: string | undefined, min: number): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < min) throw new Error(`${flag} must be an integer of at least ${min}, got ${JSON.stringify(value)}`);
  return n;
}
