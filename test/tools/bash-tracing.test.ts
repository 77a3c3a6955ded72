import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ToolTrace } from '#src/core/tracer.js';
import type { ToolResult } from '#src/core/types.js';
import { Workspace } from '#src/os/fs/workspace.js';
import { createBashTool } from '#src/tools/bash.js';
import { toolContext } from '../support/tool-context.js';
import { temporaryDirectory } from '../support/workspace.js';

const PARENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

/** A trace whose work span has this carrier; Bash calls no other service. */
const traceOf = (carrier: Record<string, string>): ToolTrace => ({ carrier, client: () => Promise.reject(new Error('not used')) });

async function environmentSeen(t: { after(fn: () => Promise<void> | void): void }, trace: ToolTrace | undefined): Promise<string> {
  const dir = await temporaryDirectory(t, 'toolport-bash-trace-');
  const ws = await Workspace.open(dir);
  t.after(() => ws.close());
  const bash = await createBashTool({ workspace: ws, sandbox: false });
  const context = { ...toolContext(), ...(trace === undefined ? {} : { trace }) };
  const result = (await bash.execute({ command: 'printf "[%s|%s|%s]" "${TRACEPARENT-unset}" "${TRACESTATE-unset}" "$0"' }, context)) as ToolResult;
  const first = result.content[0];
  return first?.type === 'text' ? first.text : '';
}

test('Bash runs the command with TRACEPARENT and TRACESTATE when the call is traced', async (t) => {
  assert.match(await environmentSeen(t, traceOf({ traceparent: PARENT, tracestate: 'vendor=a:b' })), new RegExp(`\\[${PARENT}\\|vendor=a:b\\|`));
});

test('Bash sets neither while tracing is off, nor for a trace neither sampled nor continued (an empty carrier)', async (t) => {
  assert.match(await environmentSeen(t, undefined), /\[unset\|unset\|/);
  assert.match(await environmentSeen(t, traceOf({})), /\[unset\|unset\|/);
});

test('Bash passes no value a shell would read as more than text: a tracestate with a quote is left out, the traceparent kept', async (t) => {
  assert.match(await environmentSeen(t, traceOf({ traceparent: PARENT, tracestate: "x='; touch pwned'" })), new RegExp(`\\[${PARENT}\\|unset\\|`));
});
