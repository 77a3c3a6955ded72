import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, test } from 'node:test';
import { ANYONE, Gateway } from '#src/core/gateway.js';
import { ToolRegistry } from '#src/core/registry.js';
import type { ToolDef } from '#src/core/types.js';
import { buildApp } from '#src/http/app.js';
import { runTurn } from '#src/providers/turn-runner.js';
import type { Dialect, TurnCall } from '#src/providers/turns.js';
import { builtinTools } from '#src/tools/index.js';
import { gatedTool } from '../fixtures/gated-tool.js';
import { temporaryDirectory } from '../support/workspace.js';

/** Yields to the event loop a few times: long enough for anything already able to start to start. */
async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
}

describe('runTurn', () => {
  const look = gatedTool('Look', { annotations: { readOnlyHint: true } });
  const change = gatedTool('Change', { annotations: { readOnlyHint: false } });
  const plain = gatedTool('Plain');

  async function turn(calls: Array<[string, string]>) {
    for (const gated of [look, change, plain]) gated.runs.splice(0);
    const registry = new ToolRegistry();
    for (const gated of [look, change, plain]) registry.register(gated.tool);
    const gateway = new Gateway({ registry });
    const turnCalls: TurnCall[] = calls.map(([name, id]) => ({ id, name, input: { id } }));
    const started = (): string[] => [look, change, plain].flatMap((g) => g.runs.map((r) => r.id!)).sort();
    const answered = runTurn(gateway, turnCalls, { caller: ANYONE, requestId: 'r1', transport: 'calls' });
    return { answered, started };
  }

  const release = (gated: ReturnType<typeof gatedTool>, id: string): void => gated.runs.find((r) => r.id === id)!.release(id);

  test('consecutive read-only calls run together; a call that changes things waits for them, and holds back the ones after it', async () => {
    const { answered, started } = await turn([
      ['Look', 'l1'],
      ['Look', 'l2'],
      ['Change', 'c1'],
      ['Look', 'l3'],
      ['Look', 'l4'],
    ]);
    await look.started(2);
    await settle();
    assert.deepEqual(started(), ['l1', 'l2'], 'the two reads run at once; the change waits');
    release(look, 'l2');
    await settle();
    assert.deepEqual(started(), ['l1', 'l2'], 'the change waits for every call before it, not just one');
    release(look, 'l1');
    await change.started(1);
    await settle();
    assert.deepEqual(started(), ['c1', 'l1', 'l2'], 'the reads after the change wait for it');
    release(change, 'c1');
    await look.started(4);
    release(look, 'l3');
    release(look, 'l4');
    assert.deepEqual(
      (await answered).map((a) => [a.id, a.result.content]),
      ['l1', 'l2', 'c1', 'l3', 'l4'].map((id) => [id, [{ type: 'text', text: id }]]),
    );
  });

  test('a tool without readOnlyHint (a plug-in) counts as changing things: two of them run one after the other', async () => {
    const { answered, started } = await turn([
      ['Plain', 'p1'],
      ['Plain', 'p2'],
    ]);
    await plain.started(1);
    await settle();
    assert.deepEqual(started(), ['p1']);
    release(plain, 'p1');
    await plain.started(2);
    release(plain, 'p2');
    assert.deepEqual(
      (await answered).map((a) => a.id),
      ['p1', 'p2'],
    );
  });

  test('a call whose tool does not exist holds back the calls after it until it is answered, and is answered as an error', async () => {
    const { answered, started } = await turn([
      ['Nope', 'n1'],
      ['Look', 'l1'],
    ]);
    await look.started(1);
    assert.deepEqual(started(), ['l1']);
    release(look, 'l1');
    const answers = await answered;
    assert.equal(answers[0]?.result.isError, true);
    assert.deepEqual(answers[1]?.result.content, [{ type: 'text', text: 'l1' }]);
  });
});

/** A turn of `calls` in a provider's own shape, and how to read the text of the i-th answer. */
const DIALECT_SHAPES: Record<Dialect, { body(calls: Array<[string, unknown]>): unknown; texts(answer: unknown): string[] }> = {
  anthropic: {
    body: (calls) => ({ role: 'assistant', content: calls.map(([name, input], i) => ({ type: 'tool_use', id: `toolu_${i}`, name, input })) }),
    texts: (answer) => (answer as { content: Array<{ content: Array<{ text: string }> }> }).content.map((r) => r.content.map((b) => b.text).join('\n')),
  },
  openai: {
    body: (calls) => ({
      role: 'assistant',
      content: null,
      tool_calls: calls.map(([name, input], i) => ({ id: `call_${i}`, type: 'function', function: { name, arguments: JSON.stringify(input) } })),
    }),
    texts: (answer) => (answer as Array<{ content: string }>).map((m) => m.content),
  },
  'openai-responses': {
    body: (calls) => ({
      output: calls.map(([name, input], i) => ({ type: 'function_call', id: `fc_${i}`, call_id: `call_${i}`, name, arguments: JSON.stringify(input) })),
    }),
    texts: (answer) => (answer as Array<{ output: string }>).map((item) => item.output),
  },
};

describe('POST /calls runs a turn in the order the model meant, in every dialect', () => {
  for (const dialect of Object.keys(DIALECT_SHAPES) as Dialect[]) {
    const shape = DIALECT_SHAPES[dialect];
    test(`${dialect}: Write then Read of one file reads what was written; Edit then Edit of one file both land; Bash mkdir then LS lists the new directory`, async (t) => {
      const root = await temporaryDirectory(t, 'toolport-turn-');
      const registry = new ToolRegistry();
      for (const tool of await builtinTools({ workspace: root, bashSandbox: false })) registry.register(tool as ToolDef);
      const app = await buildApp({ registry });
      t.after(() => app.close());
      const post = async (calls: Array<[string, unknown]>): Promise<string[]> => {
        const res = await app.inject({ method: 'POST', url: '/calls', payload: shape.body(calls) as object });
        assert.equal(res.statusCode, 200, res.body);
        return shape.texts(res.json());
      };

      const [written, read] = await post([
        ['Write', { file_path: 'empty.txt', content: 'first line\n' }],
        ['Read', { file_path: 'empty.txt' }],
      ]);
      assert.match(written!, /^Created /);
      assert.match(read!, /^\s+1\tfirst line/);

      await writeFile(path.join(root, 'story.txt'), 'alpha\n');
      const edits = await post([
        ['Edit', { file_path: 'story.txt', old_string: 'alpha', new_string: 'beta' }],
        ['Edit', { file_path: 'story.txt', old_string: 'beta', new_string: 'gamma' }],
      ]);
      assert.ok(
        edits.every((e) => !e.startsWith('Error')),
        edits.join('\n'),
      );
      assert.equal(await readFile(path.join(root, 'story.txt'), 'utf8'), 'gamma\n');

      const [made, listed] = await post([
        ['Bash', { command: 'mkdir -p made/inner && touch made/inner/file.txt' }],
        ['LS', { path: 'made' }],
      ]);
      assert.doesNotMatch(made!, /^Error/);
      assert.match(listed!, /inner/);
    });
  }
});
