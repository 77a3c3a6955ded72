import type { Logger } from 'pino';

/** A tool's input: always a JSON object (the root of every input schema is `type: "object"`). */
export type ToolInput = Record<string, unknown>;

/** Plain text for the model. */
export interface TextBlock {
  type: 'text';
  text: string;
}

/** An image for the model, in the Anthropic API's base64 source shape. */
export interface ImageBlock {
  type: 'image';
  source: {
    type: 'base64';
    media_type: 'image/png' | 'image/jpeg' | 'image/gif' | 'image/webp';
    data: string;
  };
}

/** A content block, in the shape the Anthropic API takes for `tool_result` content. */
export type ContentBlock = TextBlock | ImageBlock;

/** What a tool returns; goes to the model unchanged. */
export interface ToolResult {
  content: ContentBlock[];
  isError?: boolean;
}

/** Hints about a tool's behaviour, as in MCP. Clients and access policies may read them. */
export interface ToolAnnotations {
  title?: string;
  readOnlyHint?: boolean;
  destructiveHint?: boolean;
  idempotentHint?: boolean;
  openWorldHint?: boolean;
}

/** What a tool receives besides its input. */
export interface ToolContext {
  /** Aborted on deadline, client disconnect or shutdown; a tool must stop its work when it fires. */
  signal: AbortSignal;
  /** A child logger bound to the call (request id, tool). */
  log: Logger;
  /** The id of the request that caused the call. */
  requestId: string;
}

/** A JSON Schema object whose root is `type: "object"`. */
export interface ObjectSchema {
  type: 'object';
  properties?: Record<string, unknown>;
  required?: string[];
  additionalProperties?: boolean | Record<string, unknown>;
  [keyword: string]: unknown;
}

/**
 * A tool: a name, a description written for a model, a JSON Schema for its input, and the code.
 * Write it with `defineTool` for a typed input, or as a plain object with a hand-written schema.
 */
export interface ToolDef<Input extends ToolInput = ToolInput> {
  name: string;
  description: string;
  inputSchema: ObjectSchema;
  annotations?: ToolAnnotations;
  /** Deadline for one call in milliseconds; overrides the server's default. */
  timeoutMs?: number;
  /** Most calls of this tool that may run at once; the server's own cap applies too. */
  maxConcurrency?: number;
  execute(input: Input, context: ToolContext): Promise<ToolResult> | ToolResult;
}
