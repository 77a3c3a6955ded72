import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import { ToolRegistry } from '../../src/core/registry.js';
import { buildApp } from '../../src/http/app.js';
import { digestOf } from '../../src/upstreams/canonical-json.js';
import { parseUpstreams } from '../../src/upstreams/config.js';
import { formatLock, lockOf, parseLock } from '../../src/upstreams/lock.js';
import { checkDefinitions } from '../../src/upstreams/definitions.js';
import { openUpstreams } from '../../src/upstreams/open.js';
import type { UpstreamSourceOptions } from '../../src/upstreams/source.js';
import { capturedLog } from '../support/log-capture.js';
import { until } from '../support/wait.js';
import { temporaryDirectory } from '../support/workspace.js';

const QUIET = path.resolve(import.meta.dirname, '../fixtures/upstreams/quiet-server.mjs');

/** The quiet server as upstream `q`, listing the names in a file the test changes. */
async function quiet(t: { after(fn: () => Promise<void> | void): void }, names: string[], extra: Record<string, unknown> = {}) {
  const dir = await temporaryDirectory(t);
  const list = path.join(dir, 'names.txt');
  await writeFile(list, names.join('\n'));
  const file = path.join(dir, 'upstreams.json');
  const text = JSON.stringify({ mcpServers: { q: { command: process.execPath, args: [QUIET, list], ...extra } } });
  await writeFile(file, text);
  return { dir, list, file, specs: parseUpstreams(text, {}), config: { upstreams: file, upstreamsLock: undefined } };
}

async function open(
  t: { after(fn: () => Promise<void> | void): void },
  setup: Awaited<ReturnType<typeof quiet>>,
  upstream: UpstreamSourceOptions['upstream'] = {},
) {
  const registry = new ToolRegistry();
  const log = capturedLog();
  const source = (await openUpstreams(setup.specs, setup.config, registry, log.logger, { baseEnv: process.env, upstream }))!;
  t.after(() => source.stop());
  return { registry, source, log };
}

describe('an upstream that does not announce list changes', () => {
  it('is listed again every relistMs, and the registry follows', async (t) => {
    const setup = await quiet(t, ['alpha']);
    const { registry } = await open(t, setup, { relistMs: 50 });
    assert.deepEqual(
      registry.list().map((tool) => tool.name),
      ['q__alpha'],
    );
    await writeFile(setup.list, 'alpha\nbeta');
    await until(() => registry.get('q__beta') !== undefined, 'the re-list to find the new tool');
  });
});

describe('a JSON-RPC error from the upstream', () => {
  it('is an error result for the model that names the upstream and says what it said', async (t) => {
    const setup = await quiet(t, ['alpha']);
    const { registry, source } = await open(t, setup);
    const app = await buildApp({ registry, upstreams: source });
    t.after(() => app.close());
    // The upstream stops listing it, but the list has not been read again yet (no announcement, no re-list).
    await writeFile(setup.list, 'beta');
    const answer = await app.inject({ method: 'POST', url: '/tools/q__alpha', payload: {} });
    assert.deepEqual(answer.json(), {
      content: [{ type: 'text', text: 'Upstream "q" refused the call: MCP error -32602: Unknown tool: alpha' }],
      isError: true,
    });
  });
});

describe('an upstream that is down', () => {
  it('answers its calls with an error that says so while it waits to restart; the restart is counted', async (t) => {
    const setup = await quiet(t, ['alpha']);
    const { registry, source } = await open(t, setup, { backoffMs: 60_000 });
    const app = await buildApp({ registry, upstreams: source });
    t.after(() => app.close());
    const [upstream] = source.upstreams;
    const pid = upstream!.pid;
    assert.ok(pid !== undefined);
    process.kill(-pid, 'SIGKILL');
    await until(() => upstream!.state === 'down', 'the upstream to be down');
    const answer = await app.inject({ method: 'POST', url: '/tools/q__alpha', payload: {} });
    assert.deepEqual(answer.json(), {
      content: [{ type: 'text', text: 'Upstream "q" cannot take the call now: it is down (the process killed by SIGKILL); toolport is restarting it.' }],
      isError: true,
    });
    const ready = (await app.inject({ url: '/readyz' })).json() as { status: string; upstreams: { q: Record<string, unknown> } };
    assert.deepEqual(ready, {
      status: 'ready',
      upstreams: { q: { state: 'down', transport: 'stdio', tools: 1, held: 0, restarts: 0, reason: 'the process killed by SIGKILL' } },
    });
    const metrics = (await app.inject({ url: '/metrics' })).body;
    assert.match(metrics, /^toolport_upstream_up\{upstream="q",state="down"\} 0$/m);
    assert.match(metrics, /^toolport_upstream_restarts_total\{upstream="q"\} 0$/m);
    assert.match(metrics, /^toolport_upstream_tools\{upstream="q",status="served"\} 1$/m);
  });
});

describe('a lazy upstream', () => {
  it('serves the tools the lock pins without starting; the first call starts it', async (t) => {
    const setup = await quiet(t, ['alpha'], { startup: 'lazy' });
    // The lock as `toolport upstreams lock` would write it for what the upstream lists.
    const wire = { name: 'alpha', description: 'The tool alpha.', inputSchema: { type: 'object' } };
    const lock = lockOf(new Map([['q', checkDefinitions(setup.specs[0]!, [wire]).tools]]));
    assert.equal(lock.upstreams.q!.alpha!.sha256, digestOf(wire));
    await writeFile(path.join(setup.dir, 'toolport.lock.json'), formatLock(lock));
    const { registry, source } = await open(t, setup);
    assert.equal(source.upstreams[0]!.state, 'idle');
    assert.ok(registry.get('q__alpha'));
    assert.equal(source.upstreams[0]!.pid, undefined, 'no process yet');
    const app = await buildApp({ registry, upstreams: source });
    t.after(() => app.close());
    const answer = await app.inject({ method: 'POST', url: '/tools/q__alpha', payload: {} });
    assert.deepEqual(answer.json(), { content: [{ type: 'text', text: 'alpha' }], isError: false });
    assert.equal(source.upstreams[0]!.state, 'ready');
    assert.deepEqual(parseLock(await readFile(path.join(setup.dir, 'toolport.lock.json'), 'utf8'), 'lock'), lock);
  });

  it('without a lock, is listed once at start-up, then runs only once a call needs it', async (t) => {
    const setup = await quiet(t, ['alpha'], { startup: 'lazy' });
    const { registry, source } = await open(t, setup);
    assert.ok(registry.get('q__alpha'));
    assert.equal(source.upstreams[0]!.state, 'idle');
    assert.equal(source.upstreams[0]!.pid, undefined);
  });
});
