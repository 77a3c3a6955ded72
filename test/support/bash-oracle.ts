/**
 * Bash as the judge of the Bash rules: a line the rules allow runs in real bash, in a scratch
 * workspace, under `strace -f -e trace=execve` and bash's own trace of the commands it runs; every
 * program that ran must be allowed by a rule and denied by none, no builtin that evaluates code may
 * have run, and no file the Edit rules deny may have changed.
 */
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, open, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type PermissionRules, type Permissions } from '#src/core/permissions.js';
import { compilePermissions } from '#src/permissions/rules.js';
import { checkBashRules } from '#src/permissions/bash/permission.js';
import { allowMatches, denyMatches } from '#src/permissions/bash/match.js';
import { parseCommandPattern } from '#src/permissions/bash/pattern.js';

const FORBIDDEN = ['id', 'rm', 'touch', 'uname', 'date', 'whoami', 'sort', 'tr', 'printenv'];
const EDIT_DENIED = ['Edit(.env)', 'Edit(secret/**)'];

/** The two keys the oracle judges each line for: an allow list, and deny rules alone. */
export const ORACLE_KEYS: Readonly<Record<'allow' | 'deny', PermissionRules>> = {
  allow: {
    allow: ['Bash(echo:*)', 'Bash(ls:*)', 'Bash(cat:*)', 'Bash(head:*)', 'Bash(grep:*)', 'Bash(wc -l)', 'Bash(git status:*)', 'Bash(printf:*)', 'Bash(true)'],
    deny: ['Bash(rm:*)', ...EDIT_DENIED],
  },
  deny: { deny: [...FORBIDDEN.map((name) => `Bash(${name}:*)`), ...EDIT_DENIED] },
};

// Programs the rules look through: what they run is traced on its own.
const LOOKED_THROUGH = new Set(['env', 'nohup', 'timeout', 'nice', 'stdbuf', 'setsid', 'xargs', 'time', 'bash']);
// Builtins allowed without a rule, which also exist as programs (`env true` runs /usr/bin/true).
const IMPLICIT = new Set(['cd', 'pwd', 'true', 'false', 'test', '[']);
// Builtins that must never run under rules, as bash's trace shows them.
const EVALUATED = /^\++ (eval|source|\.|trap|shopt|enable|hash|alias|unalias|compgen|complete|fc|bind)( |$)/m;
const SECRET = 'SECRET=hunter2\n';

const catalog = {
  knows: () => true,
  knowsGroup: () => false,
  specifierOf: (tool: string) => (tool === 'Bash' ? ('command' as const) : tool === 'Edit' || tool === 'Read' ? ('path' as const) : undefined),
  checkCommand: (specifier: string) => void parseCommandPattern(specifier),
};

/** What the oracle made of one line for one key. */
export interface Judgement {
  readonly allowed: boolean;
  /** What ran that the rules should have stopped; empty when the line was refused or ran only what they allow. */
  readonly violations: readonly string[];
}

/** Judges lines for one key: `judge` checks a line with the rules and, when they allow it, runs it in bash. */
export class Oracle {
  private readonly permissions: Permissions;
  private readonly allow: ReturnType<typeof parseCommandPattern>[] | undefined;
  private readonly deny: ReturnType<typeof parseCommandPattern>[];

  constructor(
    private readonly key: 'allow' | 'deny',
    private readonly root: string,
  ) {
    const rules = ORACLE_KEYS[key];
    this.permissions = compilePermissions([{ where: key, rules }], catalog) as Permissions;
    const bash = (list: readonly string[] | undefined) => list?.filter((r) => r.startsWith('Bash(')).map((r) => parseCommandPattern(r.slice(5, -1)));
    this.allow = bash(rules.allow);
    this.deny = bash(rules.deny) ?? [];
  }

  /** Makes the scratch directory the lines run in. */
  static async scratch(): Promise<string> {
    return mkdtemp(path.join(tmpdir(), 'toolport-oracle-'));
  }

  async judge(line: string, index: number): Promise<Judgement> {
    try {
      await checkBashRules({ permissions: this.permissions, caller: this.key }, line);
    } catch {
      return { allowed: false, violations: [] };
    }
    return { allowed: true, violations: await this.run(line, path.join(this.root, `${this.key}-${index}`)) };
  }

  private async run(line: string, dir: string): Promise<string[]> {
    const ws = path.join(dir, 'ws');
    await mkdir(path.join(ws, 'secret'), { recursive: true });
    await mkdir(path.join(ws, 'sub'));
    await Promise.all([
      writeFile(path.join(ws, 'x.txt'), 'a\nx\n'),
      writeFile(path.join(ws, '.env'), SECRET),
      writeFile(path.join(ws, 'secret', 'key'), SECRET),
      writeFile(path.join(ws, 'evil.sh'), 'id\n'),
    ]);
    const xtrace = await open(path.join(dir, 'xtrace'), 'w');
    const traceFile = path.join(dir, 'strace');
    try {
      await new Promise<void>((resolve) => {
        const child = spawn('strace', ['-f', '-qq', '-s', '65535', '-e', 'trace=execve', '-o', traceFile, 'bash', '-x', '-c', line], {
          cwd: ws,
          env: { PATH: '/usr/bin:/bin', HOME: ws, LANG: 'C.UTF-8', BASH_XTRACEFD: '3' },
          stdio: ['ignore', 'ignore', 'ignore', xtrace.fd],
          timeout: 10_000,
          killSignal: 'SIGKILL',
        });
        child.on('close', () => resolve());
        child.on('error', () => resolve());
      });
    } finally {
      await xtrace.close();
    }
    const violations: string[] = [];
    const execs = parseExecs(await readFile(traceFile, 'utf8').catch(() => ''));
    for (const argv of execs.slice(1)) {
      const judged = this.program(argv);
      if (judged !== undefined) violations.push(judged);
    }
    const traced = await readFile(path.join(dir, 'xtrace'), 'utf8');
    const evaluated = EVALUATED.exec(traced);
    if (evaluated !== null) violations.push(`the builtin ${evaluated[1]} ran`);
    for (const file of ['.env', 'secret/key']) {
      if ((await readFile(path.join(ws, file), 'utf8').catch(() => '')) !== SECRET) violations.push(`${file}, denied by Edit rules, changed`);
    }
    if (
      await readFile(path.join(dir, 'escape')).then(
        () => true,
        () => false,
      )
    )
      violations.push('../escape, outside the workspace, was written');
    await rm(dir, { recursive: true, force: true });
    return violations;
  }

  // Why a program that ran breaks the rules, or undefined.
  private program(argv: readonly string[]): string | undefined {
    const name = path.basename(argv[0] ?? '');
    if (LOOKED_THROUGH.has(name)) return undefined;
    const words = [name, ...argv.slice(1)].map((value) => ({ text: value, value }));
    const shown = JSON.stringify(argv);
    if (this.deny.some((pattern) => denyMatches(pattern, words))) return `${shown} ran, denied by a rule`;
    if (this.allow === undefined || IMPLICIT.has(name) || this.allow.some((pattern) => allowMatches(pattern, words))) return undefined;
    return `${shown} ran, allowed by no rule`;
  }
}

/** The argument vectors of the successful execve calls in strace's output, in order. */
export function parseExecs(trace: string): string[][] {
  const done: string[][] = [];
  const pending = new Map<string, string[]>();
  for (const line of trace.split('\n')) {
    const call = /^(\d+) +execve\("(?:[^"\\]|\\.)*", \[(.*?)\](?:, 0x[0-9a-f]+(?: \/\* \d+ vars? \*\/)?)?(?:\) += (-?\d+)| <unfinished \.\.\.>)/.exec(line);
    if (call !== null) {
      const argv = cStrings(call[2] as string);
      if (call[3] === undefined) pending.set(call[1] as string, argv);
      else if (call[3] === '0') done.push(argv);
      continue;
    }
    const resumed = /^(\d+) +<\.\.\. execve resumed>.*= (-?\d+)/.exec(line);
    if (resumed !== null) {
      const argv = pending.get(resumed[1] as string);
      pending.delete(resumed[1] as string);
      if (argv !== undefined && resumed[2] === '0') done.push(argv);
    }
  }
  return done;
}

// The strings of a C array as strace prints it: "a", "b\n", "\303\251".
function cStrings(list: string): string[] {
  const strings: string[] = [];
  for (const match of list.matchAll(/"((?:[^"\\]|\\.)*)"/g)) {
    const bytes: number[] = [];
    const text = match[1] as string;
    for (let i = 0; i < text.length; i++) {
      const c = text[i] as string;
      if (c !== '\\') {
        bytes.push(...Buffer.from(c));
        continue;
      }
      const next = text[++i] as string;
      const octal = /^[0-7]{1,3}/.exec(text.slice(i));
      if (octal !== null) {
        bytes.push(parseInt(octal[0], 8));
        i += octal[0].length - 1;
      } else if (next === 'x') {
        bytes.push(parseInt(text.slice(i + 1, i + 3), 16));
        i += 2;
      } else bytes.push(({ n: 10, t: 9, r: 13, v: 11, f: 12 } as Record<string, number>)[next] ?? next.charCodeAt(0));
    }
    strings.push(Buffer.from(bytes).toString('utf8'));
  }
  return strings;
}
