import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { describe, test, type TestContext } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { ToolRegistry } from '#src/core/registry.js';
import { textResult } from '#src/core/result.js';
import { SchemaCompiler } from '#src/core/schema-compiler/compiler.js';
import type { ObjectSchema, ToolDef } from '#src/core/types.js';

// How a source's listings take their turns in the schema compiler's thread, and what the event loop
// pays meanwhile. What the compiled validators do is parity.test.ts's.

// Node.js 20 cannot load TypeScript in a worker thread: there the compiler works on the event loop.
const NO_THREAD = Number(process.versions.node.split('.')[0]) < 22 && 'worker threads cannot load TypeScript before Node.js 22';

const tool = (name: string, inputSchema: ObjectSchema): ToolDef => ({ name, description: '', inputSchema, execute: () => textResult('') });

/** Strings that must match their own patterns, `count` of them: 64 KiB of schema at 1,025. `tag` makes them new. */
const patterned = (tag: string, count: number): ObjectSchema => ({
  type: 'object',
  properties: Object.fromEntries(Array.from({ length: count }, (_, p) => [`p${p}`, { type: 'string', pattern: `^${tag}p${p}[a-z]{1,8}(x|y)+$` }])),
});
const small = (tag: string): ObjectSchema => ({ type: 'object', description: tag, properties: { a: { type: 'string', maxLength: 3 } } });

function compilerFor(t: TestContext, options?: { maxListingMs?: number }): { compiler: SchemaCompiler; registry: ToolRegistry } {
  const compiler = new SchemaCompiler(options);
  t.after(() => compiler.close());
  return { compiler, registry: new ToolRegistry({ schemaCompiler: compiler }) };
}

async function until(condition: () => boolean, what: string, deadlineMs = 30_000): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  while (!condition()) {
    if (Date.now() > deadline) assert.fail(`gave up waiting: ${what}`);
    await delay(5);
  }
}

describe('the schema compiler: the event loop', { skip: NO_THREAD }, () => {
  test('keeps turning while a 64 KiB schema compiles: a 10 ms timer fires 20 times before the listing is in place', async (t) => {
    const { registry } = compilerFor(t);
    // The thread started and warm, so what follows is compiling. The schema takes over a second of
    // the thread's time (1.1 s measured); on the event loop it held everything for 0.4 to 0.7 s.
    assert.deepEqual(await registry.replaceSourceAsync('warm', [tool('warm__t', small(''))]), []);
    let ticks = 0;
    const timer = setInterval(() => ticks++, 10);
    t.after(() => clearInterval(timer));
    let settled = false;
    const listing = registry.replaceSourceAsync('up', [tool('up__heavy', patterned('h', 1025))]).finally(() => (settled = true));
    await until(() => ticks >= 20 || settled, '20 ticks');
    assert.equal(settled, false, `the listing was in place after ${ticks} ticks`);
    assert.deepEqual(await listing, []);
    const validate = registry.validator('up__heavy')!;
    assert.equal(validate({ p7: 'hp7abcx', p1024: 'hp1024zyy' }), true);
    assert.deepEqual(validate.explain({ p7: 'hp7abc' }).violations, [{ path: '$.p7', message: 'must match pattern "^hp7[a-z]{1,8}(x|y)+$"' }]);
  });

  test('starts no thread for a listing with nothing to compile, and one for the first that has', async (t) => {
    const { compiler, registry } = compilerFor(t);
    assert.deepEqual(await registry.replaceSourceAsync('up', []), []);
    const refused = await registry.replaceSourceAsync('up', [tool('bad name', small(''))]);
    assert.equal((refused as unknown[]).length, 1);
    assert.equal(compiler.threadStarts, 0);
    assert.deepEqual(await registry.replaceSourceAsync('up', [tool('up__t', small(''))]), []);
    assert.equal(compiler.threadStarts, 1);
    // Unchanged: kept as compiled, the thread not asked.
    assert.deepEqual(await registry.replaceSourceAsync('up', [tool('up__t', small(''))]), []);
    assert.equal(compiler.threadStarts, 1);
  });

  test('an idle thread does not keep the process alive', async () => {
    const registry = new URL('../../../src/core/registry.ts', import.meta.url).href;
    const script = `
      const { ToolRegistry } = await import(${JSON.stringify(registry)});
      const refused = await new ToolRegistry().replaceSourceAsync('up', [{ name: 'up__t', description: '', inputSchema: { type: 'object' }, execute() {} }]);
      process.stdout.write(JSON.stringify(refused));`;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    const code = await Promise.race([exited, delay(60_000, 'still running', { ref: false })]);
    if (code === 'still running') child.kill('SIGKILL');
    assert.equal(code, 0);
    assert.equal(out, '[]');
  });
});

describe('the schema compiler: turns', () => {
  test("a newer listing replaces the source's listing still waiting: that one resolves 'superseded' and is never applied", async (t) => {
    const { registry } = compilerFor(t);
    let changes = 0;
    registry.onChange(() => changes++);
    // The first compiles at once; the second waits behind it until the third replaces it.
    const first = registry.replaceSourceAsync('up', [tool('up__one', small('1'))]);
    const second = registry.replaceSourceAsync('up', [tool('up__two', small('2'))]);
    const third = registry.replaceSourceAsync('up', [tool('up__three', small('3'))]);
    assert.equal(await second, 'superseded');
    assert.deepEqual(await first, []);
    assert.deepEqual(await third, []);
    assert.deepEqual(
      registry.list().map((d) => d.name),
      ['up__three'],
    );
    assert.equal(changes, 2);
  });

  test("a source's listing waiting for the thread is replaced in place: the newer one keeps its turn", async (t) => {
    const { registry } = compilerFor(t);
    const order: string[] = [];
    const listed = (name: string, listing: Promise<unknown>) => listing.then((outcome) => order.push(outcome === 'superseded' ? `${name} superseded` : name));
    const a = listed('a1', registry.replaceSourceAsync('a', [tool('a__t', small('1'))]));
    const b1 = listed('b1', registry.replaceSourceAsync('b', [tool('b__t', small('1'))]));
    const c = listed('c1', registry.replaceSourceAsync('c', [tool('c__t', small('1'))]));
    const b2 = listed('b2', registry.replaceSourceAsync('b', [tool('b__t', small('2'))]));
    await Promise.all([a, b1, c, b2]);
    assert.deepEqual(order, ['b1 superseded', 'a1', 'b2', 'c1']);
    assert.equal(registry.get('b__t')!.inputSchema.description, '2');
  });

  test('sources take turns: a source listing again while it compiles waits behind the other sources', async (t) => {
    const { registry } = compilerFor(t);
    const order: string[] = [];
    const listed = (name: string, listing: Promise<unknown>) => listing.then(() => order.push(name));
    // In arrival order the churning source's second listing comes before the quiet source's first.
    const all = [
      listed('churn 1', registry.replaceSourceAsync('churn', [tool('churn__t', small('1'))])),
      listed('churn 2', registry.replaceSourceAsync('churn', [tool('churn__t', small('2'))])),
      listed('quiet 1', registry.replaceSourceAsync('quiet', [tool('quiet__t', small('1'))])),
    ];
    await Promise.all(all);
    assert.deepEqual(order, ['churn 1', 'quiet 1', 'churn 2']);
  });
});

describe('the schema compiler: its bound', { skip: NO_THREAD }, () => {
  test("a listing that takes more than the bound of the thread's time is stopped: its new schemas refused, saying so; what waits compiles in a new thread", async (t) => {
    // A cold thread's first small listing takes about 100 ms; the heavy one at least 4 s.
    const { compiler, registry } = compilerFor(t, { maxListingMs: 1_000 });
    assert.deepEqual(await registry.replaceSourceAsync('up', [tool('up__kept', small(''))]), []);
    assert.equal(compiler.threadStarts, 1);
    const heavy = ['a', 'b', 'c', 'd'].map((tag) => tool(`up__${tag}`, patterned(tag, 1025)));
    const stopped = registry.replaceSourceAsync('up', [tool('up__kept', small('')), ...heavy]);
    const waiting = registry.replaceSourceAsync('other', [tool('other__t', small(''))]);
    const reason = "its schemas were not compiled: compiling them took more than 1000 ms of the schema compiler's time, and was stopped";
    assert.deepEqual(
      await stopped,
      heavy.map(({ name }) => ({ name, reason: `Cannot register tool "${name}": ${reason}` })),
    );
    assert.deepEqual(await waiting, []);
    assert.equal(compiler.threadStarts, 2);
    assert.deepEqual(
      registry.list().map((d) => d.name),
      ['up__kept', 'other__t'],
    );
    assert.equal(registry.validator('other__t')!({ a: 'abcd' }), false);
  });

  test('closing the compiler refuses what it compiles and what waits, saying so', async (t) => {
    const { compiler, registry } = compilerFor(t);
    const compiling = registry.replaceSourceAsync('up', [tool('up__t', patterned('x', 200))]);
    const waiting = registry.replaceSourceAsync('other', [tool('other__t', small(''))]);
    await compiler.close();
    for (const [name, listing] of [
      ['up__t', compiling],
      ['other__t', waiting],
    ] as const) {
      const refused = await listing;
      assert.ok(Array.isArray(refused));
      assert.equal(refused[0]!.name, name);
      assert.match(refused[0]!.reason, /its schemas were not compiled: the schema compiler was closed$/);
    }
    assert.deepEqual(registry.list(), []);
  });
});
