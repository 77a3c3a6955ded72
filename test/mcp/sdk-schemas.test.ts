// The SDK's own Zod schemas as judges at run time: every message the dispatcher sends for a
// table of requests, each revision, must parse as a JSON-RPC message, and each result as the
// SDK's schema for its method. (Compile-time, the dispatcher builds its results with
// `satisfies` against the SDK's published types.)
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  CallToolResultSchema,
  DiscoverResultSchema,
  EmptyResultSchema,
  InitializeResultSchema,
  JSONRPCMessageSchema,
  ListToolsResultSchema,
  ProgressNotificationSchema,
} from '@modelcontextprotocol/core';
import { CallToolResultSchema as V1CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { McpDispatcher } from '#src/mcp/dispatcher.js';
import type { JsonRpcNotification } from '#src/core/json-rpc.js';
import { ANYONE, fakeBackend, PNG } from './fake-backend.js';

const MODERN = '2026-07-28';
const META = { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': {} };
const LEGACY = ['2024-11-05', '2025-03-26', '2025-06-18', '2025-11-25'];

interface Case {
  method: string;
  params?: Record<string, unknown>;
  schema?: { safeParse(value: unknown): { success: boolean; error?: unknown } };
}

const CASES: Case[] = [
  { method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {} }, schema: InitializeResultSchema },
  { method: 'ping', schema: EmptyResultSchema },
  { method: 'server/discover', schema: DiscoverResultSchema },
  { method: 'tools/list', schema: ListToolsResultSchema },
  { method: 'tools/call', params: { name: 'Echo', arguments: { text: 'hi' } }, schema: CallToolResultSchema },
  { method: 'tools/call', params: { name: 'Pixel', _meta: { progressToken: 'p' } }, schema: CallToolResultSchema },
  { method: 'tools/call', params: { name: 'Echo', arguments: {} }, schema: CallToolResultSchema },
  { method: 'tools/call', params: { name: 'Nope' } },
  { method: 'tools/call', params: { name: 4 } },
  { method: 'no/such/method' },
];

function judge(message: unknown, schema: Case['schema'], label: string): void {
  const parsed = JSONRPCMessageSchema.safeParse(message);
  assert.ok(parsed.success, `${label}: not a JSON-RPC message: ${JSON.stringify(message)}`);
  const result = (message as { result?: unknown }).result;
  if (result !== undefined && schema) {
    const check = schema.safeParse(result);
    assert.ok(check.success, `${label}: ${JSON.stringify(result)} fails the SDK schema: ${JSON.stringify(check.error)}`);
  }
}

test("every response and notification, in every revision, parses with the SDK's schemas", async () => {
  const dispatcher = new McpDispatcher(
    fakeBackend({
      Pixel: async (_args, { onProgress }) => {
        onProgress?.({ progress: 1, total: 2, message: 'half' });
        return { content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } }] };
      },
    }),
  );
  let judged = 0;
  for (const version of [...LEGACY, MODERN]) {
    for (const { method, params, schema } of CASES) {
      const modern = version === MODERN;
      const body = modern ? { ...params, _meta: { ...META, ...(params?.['_meta'] as object) } } : params;
      const notes: JsonRpcNotification[] = [];
      const outcome = await dispatcher.handle(
        { jsonrpc: '2.0', id: judged, method, ...(body ? { params: body } : {}) },
        { caller: ANYONE, protocolVersion: version, notify: (n) => notes.push(n) },
      );
      const label = `${version} ${method} ${JSON.stringify(params ?? {})}`;
      for (const reply of [outcome.reply ?? []].flat()) judge(reply, schema, label);
      for (const note of notes) assert.ok(ProgressNotificationSchema.safeParse(note).success, `${label}: ${JSON.stringify(note)}`);
      judged++;
    }
  }
  assert.equal(judged, 50);
});

test('errors for messages whose id cannot be read parse too (the id is left out, not null)', async () => {
  const dispatcher = new McpDispatcher(fakeBackend());
  for (const outcome of [
    await dispatcher.handleText('{', { caller: ANYONE }),
    await dispatcher.handle(42, { caller: ANYONE }),
    await dispatcher.handle([], { caller: ANYONE }),
    await dispatcher.handle([{ jsonrpc: '2.0', id: 1, method: 'ping' }], { caller: ANYONE, protocolVersion: '2025-06-18' }),
  ]) {
    judge(outcome.reply, undefined, JSON.stringify(outcome.reply));
  }
});

test("a result with structured content parses with both SDKs' CallToolResultSchema in every revision; from 2025-06-18 on it carries structuredContent", async () => {
  const structuredContent = { width: 1, height: 1 };
  const dispatcher = new McpDispatcher(
    fakeBackend({
      // No text of its own: the content holds the structured content as JSON text.
      Pixel: async () => ({ content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG } }], isError: false, structuredContent }),
      // Text of its own: the content is the tool's alone.
      Echo: async () => ({ content: [{ type: 'text', text: 'one pixel' }], isError: false, structuredContent }),
    }),
  );
  const image = { type: 'image', data: PNG, mimeType: 'image/png' };
  for (const version of [...LEGACY, MODERN]) {
    const modern = version === MODERN;
    for (const [name, content] of [
      ['Pixel', [image, { type: 'text', text: '{"width":1,"height":1}' }]],
      ['Echo', [{ type: 'text', text: 'one pixel' }]],
    ] as const) {
      const outcome = await dispatcher.handle(
        { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: { text: 'x' }, ...(modern ? { _meta: META } : {}) } },
        { caller: ANYONE, protocolVersion: version },
      );
      const label = `${version} ${name}`;
      judge(outcome.reply, CallToolResultSchema, label);
      const result = (outcome.reply as { result: Record<string, unknown> }).result;
      assert.ok(V1CallToolResultSchema.safeParse(result).success, `${label}: fails the v1 SDK's schema: ${JSON.stringify(result)}`);
      assert.deepEqual(result['content'], content, label);
      assert.equal(result['isError'], false, label);
      if (version >= '2025-06-18') assert.deepEqual(result['structuredContent'], structuredContent, label);
      else assert.equal('structuredContent' in result, false, `${label}: a revision without structuredContent does not get it`);
    }
  }
});
