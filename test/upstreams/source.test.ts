import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import { ToolRegistry } from '#src/core/registry.js';
import { textResult } from '#src/core/result.js';
import { buildApp } from '#src/http/app.js';
import { parseUpstreams } from '#src/upstreams/config.js';
import { checkDefinitions } from '#src/upstreams/definitions.js';
import { formatLock, lockOf } from '#src/upstreams/lock/lock.js';
import { openUpstreams } from '#src/upstreams/open.js';
import { capturedLog } from '../support/log-capture.js';
import { until } from '../support/wait.js';
import { temporaryDirectory, type Cleanup } from '../support/workspace.js';

const QUIET = path.resolve(import.meta.dirname, '../fixtures/upstreams/quiet-server.mjs');
const CARELESS = path.resolve(import.meta.dirname, '../fixtures/upstreams/careless-server.mjs');
const CHURNING = path.resolve(import.meta.dirname, '../fixtures/upstreams/churning-server.mjs');
const TOKEN = 'tok-0123456789abcdef';

/** Opens the upstreams of `servers` (an mcpServers object) written in a temporary directory, beside `lock` when given. */
async function open(t: Cleanup, servers: Record<string, unknown>, options: { lock?: string; registry?: ToolRegistry; relistMs?: number } = {}) {
  const dir = await temporaryDirectory(t);
  const file = path.join(dir, 'upstreams.json');
  const text = JSON.stringify({ mcpServers: servers });
  await writeFile(file, text);
  if (options.lock !== undefined) await writeFile(path.join(dir, 'toolport.lock.json'), options.lock);
  const registry = options.registry ?? new ToolRegistry();
  const log = capturedLog();
  const specs = parseUpstreams(text, { API_TOKEN: TOKEN });
  const upstream = options.relistMs === undefined ? {} : { relistMs: options.relistMs };
  const source = (await openUpstreams(specs, { upstreams: file, upstreamsLock: undefined }, registry, log.logger, { baseEnv: process.env, upstream }))!;
  t.after(() => source.stop());
  return { dir, registry, source, log };
}

describe("an upstream's results", () => {
  it("hide the upstream's secrets in every text block, of answers and of isError results, however many calls run at once", async (t) => {
    const { registry, source } = await open(t, { c: { command: process.execPath, args: [CARELESS], env: { API_TOKEN: '${API_TOKEN}' } } });
    const app = await buildApp({ registry, upstreams: source });
    t.after(() => app.close());
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) => app.inject({ method: 'POST', url: i % 2 === 0 ? '/tools/c__whoami' : '/tools/c__fail', payload: {} })),
    );
    for (const [i, answer] of answers.entries()) {
      assert.ok(!answer.body.includes(TOKEN), answer.body);
      const { content, isError } = answer.json() as { content: Array<{ type: string; text?: string }>; isError: boolean };
      if (i % 2 === 0) {
        assert.equal(isError, false);
        assert.deepEqual(
          content.map((block) => (block.type === 'text' ? block.text : block.type)),
          ['You are bot-7, token [redacted].', 'image', '[redacted][redacted]'],
        );
      } else {
        assert.deepEqual(
          { content, isError },
          {
            content: [{ type: 'text', text: '401 from https://api.example.com with "Authorization: Bearer [redacted]"' }],
            isError: true,
          },
        );
      }
    }
  });
});

describe('the tools of one listing that are not served', () => {
  it('are one warning line, with counts and the first few reasons, however many there are', async (t) => {
    const dir = await temporaryDirectory(t);
    const names = path.join(dir, 'names.txt');
    const bad = Array.from({ length: 3000 }, (_, i) => `bad.${i}`);
    await writeFile(names, ['changed', 'fresh', 'taken', 'kept', ...bad].join('\n'));
    const spec = parseUpstreams(JSON.stringify({ mcpServers: { q: { command: 'x' } } }), {})[0]!;
    const wire = (name: string, description = `The tool ${name}.`) => ({ name, description, inputSchema: { type: 'object' } });
    // Reviewed before `changed` changed its description and before `fresh` existed.
    const lock = formatLock(lockOf(new Map([['q', checkDefinitions(spec, [wire('changed', 'Before.'), wire('taken'), wire('kept')]).tools]])));
    const registry = new ToolRegistry().register({
      name: 'q__taken',
      description: 'A built-in.',
      inputSchema: { type: 'object' },
      execute: () => textResult(''),
    });
    const { source, log } = await open(t, { q: { command: process.execPath, args: [QUIET, names] } }, { lock, registry, relistMs: 20 });
    assert.deepEqual(source.status()['q'], { state: 'ready', transport: 'stdio', tools: 1, held: 3003, restarts: 0 });
    // Several listings, each one line.
    await until(() => log.lines.filter((l) => l.level === 40).length >= 3, 'three listings');
    const warnings = log.lines.filter((l) => l.level === 40);
    for (const line of warnings) {
      assert.deepEqual(
        { ...line, time: undefined, pid: undefined, hostname: undefined },
        {
          level: 40,
          time: undefined,
          pid: undefined,
          hostname: undefined,
          upstream: 'q',
          notServed: 3003,
          refused: 3001,
          changed: 1,
          new: 1,
          first: [
            ...bad.slice(0, 3).map((name) => ({
              tool: name,
              reason: `would be served as "q__${name}", which breaks the tool-name rule ^[a-zA-Z0-9_-]{1,64}$ (characters other than letters, digits, _ and -); it is not renamed`,
            })),
            { tool: 'changed', reason: 'its definition differs from the lock file (see toolport upstreams diff)' },
            { tool: 'fresh', reason: 'it is not in the lock file (run toolport upstreams lock to serve it)' },
            { tool: 'q__taken', reason: 'Cannot register tool "q__taken": a tool with this name is already registered' },
          ],
          msg: 'upstream tools not served (the first few with their reasons)',
        },
      );
    }
    assert.equal(log.lines.filter((l) => l.tool !== undefined).length, 0, 'no line per tool');
  });

  it('log nothing when every tool is served', async (t) => {
    const dir = await temporaryDirectory(t);
    const names = path.join(dir, 'names.txt');
    await writeFile(names, 'alpha\nbeta');
    const { registry, log } = await open(t, { q: { command: process.execPath, args: [QUIET, names] } });
    assert.ok(registry.get('q__beta'));
    assert.deepEqual(
      log.lines.filter((l) => l.level !== 30),
      [],
    );
  });
});

describe('a lazy upstream served from the lock', () => {
  it('refuses the first call when the process, once started, lists a definition other than the pinned one', async (t) => {
    const dir = await temporaryDirectory(t);
    const list = path.join(dir, 'names.txt');
    await writeFile(list, 'alpha');
    const text = JSON.stringify({ mcpServers: { q: { command: process.execPath, args: [QUIET, list], startup: 'lazy' } } });
    const file = path.join(dir, 'upstreams.json');
    await writeFile(file, text);
    const specs = parseUpstreams(text, {});
    // Pinned as reviewed; the process lists "The tool alpha." instead.
    const pinned = { name: 'alpha', description: 'Reviewed description.', inputSchema: { type: 'object' } };
    await writeFile(path.join(dir, 'toolport.lock.json'), formatLock(lockOf(new Map([['q', checkDefinitions(specs[0]!, [pinned]).tools]]))));
    const registry = new ToolRegistry();
    const source = (await openUpstreams(specs, { upstreams: file, upstreamsLock: undefined }, registry, capturedLog().logger, { baseEnv: process.env }))!;
    t.after(() => source.stop());
    assert.equal(registry.get('q__alpha')?.description, 'Reviewed description.');
    const app = await buildApp({ registry, upstreams: source });
    t.after(() => app.close());
    const answer = await app.inject({ method: 'POST', url: '/tools/q__alpha', payload: {} });
    assert.deepEqual(answer.json(), {
      content: [
        {
          type: 'text',
          text: 'Upstream "q" now lists a definition of alpha that differs from the one pinned in the lock file: the tool is held until `toolport upstreams lock` is run again.',
        },
      ],
      isError: true,
    });
    assert.equal(registry.get('q__alpha'), undefined, 'and it is no longer served');
  });
});

describe('a lazy upstream without a lock file', () => {
  it('has its first call wait until the list its start gave is applied: a definition changed since start-up is refused, not called, and the new one is served', async (t) => {
    const dir = await temporaryDirectory(t);
    // The process started for the call lists other patterns than the one that listed at start-up:
    // they take a while to compile, and the call must not run before they are served.
    const counter = path.join(dir, 'counter.txt');
    await writeFile(counter, '');
    const { registry, source } = await open(t, {
      lazy: { command: process.execPath, args: [CHURNING, 'quiet'], cwd: dir, env: { CHURN_COUNTER: counter, CHURN_TOOLS: '4' }, startup: 'lazy' },
    });
    assert.equal(source.status()['lazy']?.state, 'idle');
    assert.equal(registry.get('lazy__t0')?.description, 'Listing 1: tool 0.');
    const app = await buildApp({ registry, upstreams: source });
    t.after(() => app.close());
    const answer = await app.inject({ method: 'POST', url: '/tools/lazy__t0', payload: {} });
    assert.deepEqual(answer.json(), {
      content: [
        {
          type: 'text',
          text: 'Upstream "lazy" now lists a definition of t0 other than the one this call was made for: list the tools again and call it as it is now.',
        },
      ],
      isError: true,
    });
    assert.equal(registry.get('lazy__t0')?.description, 'Listing 2: tool 0.');
    const again = await app.inject({ method: 'POST', url: '/tools/lazy__t0', payload: {} });
    assert.deepEqual(again.json(), { content: [{ type: 'text', text: 'listing 2' }], isError: false });
  });
});
