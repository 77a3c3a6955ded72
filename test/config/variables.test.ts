import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, test } from 'node:test';
import { CONFIG_VARIABLES, SECTIONS } from '#src/config/config.js';
import { sectionVariables } from '#src/config/variables.js';

const SRC = path.resolve(import.meta.dirname, '../../src');

/** Every TypeScript file of src/, relative to it, with its text. */
async function sources(): Promise<Array<{ file: string; text: string }>> {
  const files = (await readdir(SRC, { recursive: true })).filter((file) => file.endsWith('.ts')).sort();
  return Promise.all(files.map(async (file) => ({ file, text: await readFile(path.join(SRC, file), 'utf8') })));
}

describe('configuration variables', () => {
  test('each variable is declared in exactly one section', () => {
    const owners = new Map<string, string[]>();
    for (const [section, fields] of Object.entries(SECTIONS)) {
      for (const { name } of sectionVariables(fields)) owners.set(name, [...(owners.get(name) ?? []), section]);
    }
    const twice = [...owners].filter(([, sections]) => sections.length > 1);
    assert.deepEqual(twice, [], 'a variable declared by two sections: keep one declaration');
    assert.deepEqual(
      [...owners.keys()],
      CONFIG_VARIABLES.map((v) => v.name),
    );
  });

  test('no field of one section is a field of another', () => {
    const fields = Object.values(SECTIONS).flatMap((section) => Object.keys(section));
    assert.deepEqual(
      fields.filter((field, i) => fields.indexOf(field) !== i),
      [],
      'a Config field two sections both give',
    );
  });

  test('each variable is described in one place of src/: its section, and nowhere else', async () => {
    const files = await sources();
    const described: string[] = [];
    for (const { name, meaning } of CONFIG_VARIABLES) {
      const declaring = files.filter(({ text }) => text.includes(`name: '${name}'`)).map(({ file }) => file);
      if (declaring.length !== 1 || !declaring[0]!.startsWith('config/sections/'))
        described.push(`${name} is declared in ${declaring.join(', ') || 'no file'}`);
      // The text as the source writes it: in single quotes, or in double quotes when it holds one.
      const quoted = [`'${meaning}'`, `"${meaning}"`];
      const describing = files.filter(({ text }) => quoted.some((q) => text.includes(q))).map(({ file }) => file);
      if (describing.length !== 1) described.push(`the meaning of ${name} is written in ${describing.join(', ') || 'no file'}`);
    }
    assert.deepEqual(described, []);
  });
});
