import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, test } from 'node:test';
import { CONFIG_VARIABLES, loadConfig } from '#src/config/config.js';
import { ERROR_CODES } from '#src/core/errors.js';
import { configTable, DOCS_COMMAND, driftedPages, errorTable, pages, renderPage, ROOT } from '../scripts/generate-docs.js';

/** The GitHub anchor of a heading: lower case, punctuation dropped, spaces as hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** Markdown without fenced code blocks and inline code, where a link or heading is not one. */
function prose(markdown: string): string {
  return markdown.replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '');
}

/** The anchors of a page's headings, a repeated heading numbered as GitHub numbers it. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const found = new Set<string>();
  for (const [, heading] of markdown.replace(/^```[\s\S]*?^```/gm, '').matchAll(/^#{1,6} (.+)$/gm)) {
    const base = slug(heading!);
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    found.add(count === 0 ? base : `${base}-${count}`);
  }
  return found;
}

/** Every relative link of a page that leads nowhere: a missing file, or an anchor no heading has. */
async function brokenLinks(page: string, text: string, root = ROOT): Promise<string[]> {
  const broken: string[] = [];
  for (const [, target] of prose(text).matchAll(/\]\(([^)\s]+)\)/g)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target!)) continue;
    const [file = '', anchor] = target!.split('#');
    const resolved = file === '' ? path.join(root, page) : path.resolve(path.dirname(path.join(root, page)), file);
    if (!existsSync(resolved)) {
      broken.push(`${page}: ${target} (no file ${path.relative(root, resolved)})`);
      continue;
    }
    if (anchor === undefined) continue;
    const targetText = file === '' ? text : await readFile(resolved, 'utf8');
    if (!resolved.endsWith('.md') || !anchors(targetText).has(anchor)) broken.push(`${page}: ${target} (no heading #${anchor})`);
  }
  return broken;
}

describe('the generated tables', () => {
  test(`the committed pages hold the tables the code gives now (${DOCS_COMMAND} rewrites them)`, async () => {
    assert.deepEqual(await driftedPages(), [], `generated tables differ from the code: run ${DOCS_COMMAND}`);
  });

  test('a page whose generated table was edited by hand is found', async () => {
    const page = await readFile(path.join(ROOT, 'docs/rest-api.md'), 'utf8');
    assert.equal(renderPage(page), page);
    const edited = page.replace('| `QUEUE_FULL` | 503 |', '| `QUEUE_FULL` | 429 |');
    assert.notEqual(edited, page);
    assert.equal(renderPage(edited), page);
  });

  test('a block of an unknown name, or without its end marker, is refused', () => {
    assert.throws(() => renderPage('<!-- generated: nothing -->\nx\n<!-- end generated -->\n'), /unknown generated block "nothing"/);
    assert.throws(() => renderPage('<!-- generated: config -->\nx\n'), /has no "<!-- end generated -->" after it/);
  });

  test('the configuration table has a row for every variable of CONFIG_VARIABLES, in order', () => {
    const names = [...configTable().matchAll(/^\| `([A-Z_]+)` \|/gm)].map((m) => m[1]);
    assert.deepEqual(
      names,
      CONFIG_VARIABLES.map((v) => v.name),
    );
  });

  test('the error table has a row for every code of the catalog, with its status and JSON-RPC code', () => {
    const rows = [...errorTable().matchAll(/^\| `([A-Z_]+)` \| (\d+) \| (-\d+)/gm)].map((m) => m[1]);
    assert.deepEqual(rows, ERROR_CODES);
    assert.match(errorTable(), /^\| `HEADERS_TOO_LARGE` \| 431 \| -31007 \| /m);
    assert.match(errorTable(), /^\| `INVALID_JSON` \| 400 \| -32700 \(parse error\) \| /m);
  });
});

describe('CONFIG_VARIABLES', () => {
  /** The names loadConfig looks up in an environment, found through a Proxy over it. */
  function namesRead(values: Record<string, string>, cwd = '/srv/toolport'): Set<string> {
    const read = new Set<string>();
    const env = new Proxy(values, {
      get: (target, name) => {
        if (typeof name === 'string') read.add(name);
        return Reflect.get(target, name);
      },
      has: (target, name) => {
        if (typeof name === 'string') read.add(name);
        return Reflect.has(target, name);
      },
      getOwnPropertyDescriptor: (target, name) => {
        if (typeof name === 'string') read.add(name);
        return Reflect.getOwnPropertyDescriptor(target, name);
      },
      ownKeys: () => assert.fail('loadConfig enumerates the environment, so the names it reads cannot be listed'),
    });
    loadConfig(env, cwd);
    return read;
  }

  test('loadConfig reads no variable the list leaves out, and every variable the list names', () => {
    const read = new Set([
      ...namesRead({}),
      ...namesRead({ TOOLPORT_WORKSPACE: '/srv/ws', TOOLPORT_API_KEYS: 'k'.repeat(32), TOOLPORT_CORS_ORIGINS: 'https://a.example' }),
      ...namesRead({ HOME: '/home/me' }, '/srv/toolport'),
    ]);
    const listed = new Set(CONFIG_VARIABLES.map((v) => v.name));
    assert.deepEqual([...read].filter((name) => !listed.has(name)).sort(), [], 'add these to CONFIG_VARIABLES in src/config/config.ts');
    assert.deepEqual([...listed].filter((name) => !read.has(name)).sort(), [], 'CONFIG_VARIABLES names variables loadConfig never reads');
  });

  test('names each variable once', () => {
    const names = CONFIG_VARIABLES.map((v) => v.name);
    assert.deepEqual(names, [...new Set(names)]);
  });
});

describe('links of README.md and docs/', () => {
  test('every relative link leads to a file that exists, and every #anchor to a heading of its page', async () => {
    const broken: string[] = [];
    for (const page of await pages()) broken.push(...(await brokenLinks(page, await readFile(path.join(ROOT, page), 'utf8'))));
    assert.deepEqual(broken, []);
  });

  test('a link to a missing file, or to an anchor no heading has, is found', async () => {
    const text =
      '# Title\n\n## The contract of `POST /tools/:name`\n\n[a](#title) [b](#the-contract-of-post-toolsname) [c](docs/nowhere.md) [d](README.md#no-such-heading) [e](#gone) [f](https://example.com/x)\n\n```\n[g](not-a-link.md)\n```\n';
    assert.deepEqual(await brokenLinks('README.md', text), [
      'README.md: docs/nowhere.md (no file docs/nowhere.md)',
      'README.md: README.md#no-such-heading (no heading #no-such-heading)',
      'README.md: #gone (no heading #gone)',
    ]);
  });

  test('every test file the pages name exists', async () => {
    const missing: string[] = [];
    for (const page of await pages()) {
      const text = await readFile(path.join(ROOT, page), 'utf8');
      for (const [file] of text.matchAll(/(?<![\w/])test\/[\w./-]+\.test\.ts/g)) if (!existsSync(path.join(ROOT, file))) missing.push(`${page}: ${file}`);
    }
    assert.deepEqual(missing, []);
  });
});
