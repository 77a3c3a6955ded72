import assert from 'node:assert/strict';
import { test } from 'node:test';
import { McpDispatcher, type DispatchContext } from '#src/mcp/dispatcher.js';
import { MAX_TURN_ANSWER_BYTES } from '#src/providers/turn-runner.js';
import { ANYONE, fakeBackend, type FakeCaller } from './fake-backend.js';

const LEGACY = '2025-03-26';
const context = (): DispatchContext<FakeCaller> => ({ caller: ANYONE, protocolVersion: LEGACY });
const call = (id: number, text: string) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'Echo', arguments: { text } } });

test(`the answers of one batch take at most ${MAX_TURN_ANSWER_BYTES} bytes: a call whose answer would pass that gets an error result saying so, the rest stay`, async () => {
  // Each answer is a little over 5 MiB: six fit, the seventh and later do not.
  const big = 'x'.repeat(5 * 1024 * 1024);
  const backend = fakeBackend({ Echo: async (args) => ({ content: [{ type: 'text', text: String(args['text']) }], isError: false }) });
  const batch = [...Array.from({ length: 10 }, (_, i) => call(i, big)), call(10, 'small')];
  const outcome = await new McpDispatcher(backend).handle(batch, context());
  assert.equal(outcome.status, 200);
  const replies = outcome.reply as unknown as Array<{ id: number; result: { content: Array<{ text: string }>; isError: boolean } }>;
  assert.equal(replies.length, 11, 'every call is answered');
  assert.equal(backend.calls.length, 11, 'every call ran');
  const kept = replies.filter((r) => r.result.content[0]!.text === big).map((r) => r.id);
  const leftOut = replies.filter((r) => r.result.isError).map((r) => r.id);
  assert.deepEqual(kept.length + leftOut.length, 10);
  assert.ok(kept.length === 6, `six answers of 5 MiB fit in 32 MiB: ${kept.length}`);
  for (const r of replies.filter((r) => r.result.isError)) {
    assert.match(
      r.result.content[0]!.text,
      new RegExp(`^The call ran, but its answer \\(\\d+ bytes\\) is left out: the answers of one batch may take at most ${MAX_TURN_ANSWER_BYTES} bytes\\.`),
    );
  }
  assert.deepEqual(
    replies.at(-1),
    { jsonrpc: '2.0', id: 10, result: { content: [{ type: 'text', text: 'small' }], isError: false } },
    'a small answer after the budget is spent still fits',
  );
  assert.ok(JSON.stringify(replies).length <= MAX_TURN_ANSWER_BYTES + 64 * 1024, 'the whole answer stays within the budget');
});
