import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CallToolResultSchema } from '@modelcontextprotocol/core';
import { CallToolResultSchema as V1CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import type { ToolResult } from '#src/core/types.js';
import { McpDispatcher } from '#src/mcp/dispatcher.js';
import { ANYONE, fakeBackend, PNG } from './fake-backend.js';

const META = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };

const annotations = { audience: ['user' as const], priority: 0.5 };
const RESULT: ToolResult = {
  content: [
    { type: 'text', text: 'mixed', annotations },
    { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG } },
    { type: 'audio', source: { type: 'base64', media_type: 'audio/wav', data: 'UklGRg==' }, annotations },
    { type: 'resource', resource: { uri: 'file:///a.txt', mimeType: 'text/plain', text: 'a' } },
    { type: 'resource', resource: { uri: 'file:///a.bin', blob: 'AAEC' } },
    { type: 'resource_link', uri: 'file:///r.pdf', name: 'r.pdf', title: 'Report', size: 3 },
  ],
  isError: false,
};
const AUDIO = { type: 'audio', data: 'UklGRg==', mimeType: 'audio/wav', annotations };
const AUDIO_AS_TEXT = { type: 'text', text: "[audio/wav audio, 4 bytes, not shown: the client's MCP revision has no audio content]", annotations };
const LINK = { type: 'resource_link', uri: 'file:///r.pdf', name: 'r.pdf', title: 'Report', size: 3 };
const LINK_AS_TEXT = { type: 'text', text: '[resource link: r.pdf (Report), file:///r.pdf, 3 bytes]' };

test("tools/call answers audio from 2025-03-26 and resource links from 2025-06-18, as text before; every answer parses with both SDKs' schemas", async () => {
  const dispatcher = new McpDispatcher(fakeBackend({ Pixel: async () => RESULT }));
  for (const [version, audio, link] of [
    ['2024-11-05', AUDIO_AS_TEXT, LINK_AS_TEXT],
    ['2025-03-26', AUDIO, LINK_AS_TEXT],
    ['2025-06-18', AUDIO, LINK],
    ['2025-11-25', AUDIO, LINK],
    ['2026-07-28', AUDIO, LINK],
  ] as const) {
    const modern = version === '2026-07-28';
    const outcome = await dispatcher.handle(
      { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'Pixel', ...(modern ? { _meta: META } : {}) } },
      { caller: ANYONE, protocolVersion: version },
    );
    const result = (outcome.reply as { result: Record<string, unknown> }).result;
    assert.deepEqual(
      result['content'],
      [
        { type: 'text', text: 'mixed', annotations },
        { type: 'image', data: PNG, mimeType: 'image/png' },
        audio,
        { type: 'resource', resource: { uri: 'file:///a.txt', mimeType: 'text/plain', text: 'a' } },
        { type: 'resource', resource: { uri: 'file:///a.bin', blob: 'AAEC' } },
        link,
      ],
      version,
    );
    const check = CallToolResultSchema.safeParse(result);
    assert.ok(check.success, `${version}: ${JSON.stringify(check.error)}`);
    assert.ok(V1CallToolResultSchema.safeParse(result).success, `${version}: fails the v1 SDK's schema`);
  }
});
