import { Type } from 'typebox';
import { errorResult } from '../../core/result.js';
import type { ToolResult } from '../../core/types.js';

/** The `expected_version` input of Edit and Write: a version as Read reports it. */
export function expectedVersionSchema(tool: 'Edit' | 'Write'): ReturnType<typeof Type.String> {
  return Type.String({
    pattern: '^[0-9a-f]{16}$',
    description: `Optional: the version Read reported (16 hex digits). ${tool} then refuses, changing nothing, if the file's content is no longer at that version.`,
  });
}

/** A result with the file's version after it, in a block of its own, as Read, Edit and Write report it. */
export function versionNote<T extends ToolResult>(result: T, version: string): T {
  result.content.push({ type: 'text', text: `(version ${version})` });
  return result;
}

/** The refusal when `expected_version` does not match; `now` says what the file is instead. */
export function versionMismatch(shown: string, now: string): ToolResult {
  return errorResult(
    `Path ${shown} is not at the expected version: it ${now}. Someone changed it since you read it; nothing was written. Read it again and redo the change on the current content.`,
  );
}
