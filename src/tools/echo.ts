import { Type } from 'typebox';
import { defineTool } from '../core/define-tool.js';
import { textResult } from '../core/result.js';

/** The smallest working tool: returns its input text. Useful to check a deployment end to end. */
export const Echo = defineTool({
  name: 'Echo',
  description: 'Returns the given text unchanged. Use it to check that the tool server is reachable and that tool calls round-trip; it has no other effect.',
  inputSchema: Type.Object({ text: Type.String({ description: 'The text to return.' }) }, { additionalProperties: false }),
  annotations: { title: 'Echo', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  execute: ({ text }) => textResult(text),
});
