/**
 * Bash as the judge of the Bash rules, at scale: `npm run oracle:bash-rules [-- --lines 100000] [-- --seed 1]`.
 *
 * Generates lines from the grammar of test/support/bash-grammar.ts, checks each under an allow list
 * and under deny rules alone, runs every line the rules allow in real bash under strace, and reports
 * the counts and every line after which bash ran what the rules should have stopped. Exits 1 when
 * there is one. Needs strace (scripts/install-system-deps.sh installs it).
 */
import { rm } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { parseArgs } from 'node:util';
import { generateLine, Random } from '../test/support/bash-grammar.js';
import { Oracle } from '../test/support/bash-oracle.js';

const { values } = parseArgs({ options: { lines: { type: 'string', default: '100000' }, seed: { type: 'string', default: '1' } } });
const total = Number(values.lines);
const seed = Number(values.seed);
const root = await Oracle.scratch();
const oracles = { allow: new Oracle('allow', root), deny: new Oracle('deny', root) };
const random = new Random(seed);
const counts = { lines: 0, allowed: { allow: 0, deny: 0 }, ran: 0 };
const bypasses: string[] = [];
const started = performance.now();
const parallel = Math.max(2, availableParallelism());

let next = 0;
async function worker(): Promise<void> {
  while (next < total) {
    const index = next++;
    const line = generateLine(random);
    counts.lines++;
    for (const key of ['allow', 'deny'] as const) {
      const judgement = await oracles[key].judge(line, index);
      if (!judgement.allowed) continue;
      counts.allowed[key]++;
      counts.ran++;
      for (const violation of judgement.violations) {
        bypasses.push(`${key}: ${JSON.stringify(line)}: ${violation}`);
        process.stderr.write(`bypass: ${bypasses.at(-1)}\n`);
      }
    }
    if (counts.lines % 5000 === 0) process.stderr.write(`${counts.lines} lines, ${counts.ran} run, ${bypasses.length} bypasses\n`);
  }
}
await Promise.all(Array.from({ length: parallel }, () => worker()));
await rm(root, { recursive: true, force: true });

const seconds = ((performance.now() - started) / 1000).toFixed(0);
process.stdout.write(
  `${counts.lines} lines generated (seed ${seed}), checked under 2 keys: ${counts.allowed.allow} allowed under the allow list and ` +
    `${counts.allowed.deny} under deny rules alone, ${counts.ran} runs of bash under strace in ${seconds} s; ${bypasses.length} bypasses\n`,
);
for (const bypass of bypasses) process.stdout.write(`${bypass}\n`);
process.exitCode = bypasses.length === 0 ? 0 : 1;
