import assert from 'node:assert/strict';
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

const ROOT = path.resolve(import.meta.dirname, '..');
/** Folders of test/ that mirror nothing in src/ (docs/architecture.md, Tests). */
const OWN = new Set(['e2e', 'deploy', 'fixtures', 'support']);

/** Every folder under `dir`, relative to it. */
function folders(dir: string, under = ''): string[] {
  return readdirSync(path.join(dir, under), { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .flatMap((entry) => {
      const folder = path.join(under, entry.name);
      return [folder, ...folders(dir, folder)];
    });
}

test('test/ mirrors the folders of src/, as docs/architecture.md says: each folder of tests is one of src/ or one of its own', () => {
  const strays = folders(path.join(ROOT, 'test'))
    .filter((folder) => !OWN.has(folder.split(path.sep)[0]!))
    .filter((folder) => !(existsSync(path.join(ROOT, 'src', folder)) && statSync(path.join(ROOT, 'src', folder)).isDirectory()));
  assert.deepEqual(strays, [], 'test folders with no folder of the same path in src/');
});

test('a test named for a module sits at that module path: no test named for a module of another folder', () => {
  const modules = new Map<string, string[]>();
  for (const folder of ['', ...folders(path.join(ROOT, 'src'))]) {
    for (const entry of readdirSync(path.join(ROOT, 'src', folder))) {
      if (!entry.endsWith('.ts') || entry.endsWith('.d.ts') || entry === 'index.ts') continue;
      const name = entry.slice(0, -3);
      modules.set(name, [...(modules.get(name) ?? []), folder]);
    }
  }
  const misplaced: string[] = [];
  // test/'s own files are the repository's checks (docs, examples, this layout), named for what they check.
  for (const folder of folders(path.join(ROOT, 'test'))) {
    if (OWN.has(folder.split(path.sep)[0]!)) continue;
    for (const entry of readdirSync(path.join(ROOT, 'test', folder))) {
      if (!entry.endsWith('.test.ts')) continue;
      const name = entry.slice(0, -'.test.ts'.length);
      const homes = modules.get(name);
      // A module name found only elsewhere (and not here): the test belongs beside it.
      if (homes !== undefined && !homes.includes(folder)) misplaced.push(`test/${path.join(folder, entry)} (src/${homes.join(', src/')})`);
    }
  }
  assert.deepEqual(misplaced, []);
});
