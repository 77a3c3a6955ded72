/**
 * `npm run validators`: writes src/tools/validators.generated.ts, the built-in tools' input
 * and output validators as Ajv standalone code, so that start-up compiles none of them (compiling them, with
 * Ajv's meta-schema, was 45 ms of every start). `--check` only compares: it exits 1, naming this
 * command, when the committed file differs from what the schemas give now.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { precompiledValidatorsSource } from './precompiled-validators.js';

const OUT = path.resolve(import.meta.dirname, '../src/tools/validators.generated.ts');

const workspace = await mkdtemp(path.join(tmpdir(), 'toolport-validators-'));
try {
  const source = await precompiledValidatorsSource(workspace);
  if (process.argv.includes('--check')) {
    const committed = await readFile(OUT, 'utf8').catch(() => '');
    if (committed !== source) {
      console.error(`${path.relative(process.cwd(), OUT)} differs from the built-in tools' schemas: run npm run validators`);
      process.exitCode = 1;
    }
  } else {
    await writeFile(OUT, source);
    console.log(`wrote ${path.relative(process.cwd(), OUT)}`);
  }
} finally {
  await rm(workspace, { recursive: true, force: true });
}
