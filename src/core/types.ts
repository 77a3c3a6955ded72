import type { Logger } from 'pino';
import type { Permissions, ToolRules } from './permissions.js';
import type { ToolTrace } from './tracer.js';
import type { Static } from 'typebox';
import type {
  AudioBlockSchema,
  ContentAnnotationsSchema,
  ContentBlockSchema,
  ImageBlockSchema,
  ResourceBlockSchema,
  ResourceLinkBlockSchema,
  TextBlockSchema,
  ToolAnnotationsSchema,
  ToolResultSchema,
} from './schemas.js';

/** A tool's input: always a JSON object (the root of every input schema is `type: "object"`). */
export type ToolInput = Record<string, unknown>;

/** Plain text for the model. */
export type TextBlock = Static<typeof TextBlockSchema>;

/** An image, in the Anthropic API's base64 source shape, of any `image/...` type. */
export type ImageBlock = Static<typeof ImageBlockSchema>;

/** Audio, in the image block's shape. */
export type AudioBlock = Static<typeof AudioBlockSchema>;

/** A resource embedded in a result, in MCP's shape: its URI and its contents, text or bytes. */
export type ResourceBlock = Static<typeof ResourceBlockSchema>;

/** A resource a result names without its contents, in MCP's shape. */
export type ResourceLinkBlock = Static<typeof ResourceLinkBlockSchema>;

/** MCP's hints about a content block: who it is for, how much it matters, when it last changed. */
export type ContentAnnotations = Static<typeof ContentAnnotationsSchema>;

/**
 * A content block of a result: text and images in the shape the Anthropic API takes for
 * `tool_result` content, audio in the image's shape, resources and resource links in MCP's.
 */
export type ContentBlock = Static<typeof ContentBlockSchema>;

/**
 * What a tool returns; goes to the model unchanged. The pipeline's answer always sets `isError`
 * (`Static<typeof ToolResultSchema>`); a tool may leave it out, for false. `structuredContent` is
 * the result as a JSON object, for programs (MCP's `structuredContent`); a tool with an
 * `outputSchema` returns it, matching the schema, on every success.
 */
export type ToolResult = Omit<Static<typeof ToolResultSchema>, 'isError'> & { isError?: boolean };

/** A result that reports a failure: text for the model, and no structured content. */
export interface ErrorResult {
  content: ContentBlock[];
  isError: true;
}

/** Hints about a tool's behaviour, as in MCP. Clients and access policies may read them. */
export type ToolAnnotations = Static<typeof ToolAnnotationsSchema>;

/** What a tool receives besides its input. */
export interface ToolContext {
  /** Aborted on deadline, client disconnect or shutdown; a tool must stop its work when it fires. */
  signal: AbortSignal;
  /** A child logger bound to the call (request id, tool). */
  log: Logger;
  /** The id of the request that caused the call. */
  requestId: string;
  /**
   * Who the call is for, as admission tells callers apart: the API key's label or, without keys,
   * the client's network; undefined for in-process callers and stdio. For a tool that shares a
   * resource of its own between calls (an upstream's connection) and must share it fairly.
   */
  caller?: string | undefined;
  /**
   * Reports progress to a caller that asked for it (an MCP client that sent a progress token);
   * undefined when no one listens, so call it as `context.progress?.(...)`. A string is a message
   * (one step on); an object may give `progress` (it must increase from one report to the next,
   * else the report is dropped), `total` and `message`. Cheap, never throws, and ignored once the
   * call has answered. Rate-limit it yourself when reports could come in a flood (output lines).
   */
  progress?: (update: string | ProgressUpdate) => void;
  /**
   * The caller's permission rules, for a tool whose rules look at what it touches (`ToolDef.rules`):
   * it asks them about the path it really resolved, or the command it is about to run, and throws
   * the `PermissionDenied` they answer before reading or writing anything. Undefined: no rules.
   */
  permissions?: Permissions | undefined;
  /**
   * The call's trace, when tracing is on: a tool passes its context on to what it calls (a
   * process's TRACEPARENT, an upstream request's `_meta`). Undefined while tracing is off.
   */
  trace?: ToolTrace | undefined;
}

/** A progress report as a tool gives it: a message, or how far it got (of how much), or both. */
export interface ProgressUpdate {
  progress?: number;
  total?: number;
  message?: string;
}

/**
 * A progress report as the caller hears it (`CallRequest.onProgress`, and MCP's and REST's
 * progress): `progress` is always set and increases with each report.
 */
export interface Progress {
  progress: number;
  total?: number;
  message?: string;
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
  /**
   * The JSON Schema of the result's `structuredContent` (root `type: "object"`), published in
   * MCP's tool list and the OpenAPI document. With it, every successful result must carry
   * `structuredContent` matching it; the pipeline turns one that does not into an error result.
   */
  outputSchema?: ObjectSchema;
  annotations?: ToolAnnotations;
  /** Deadline for one call in milliseconds; overrides the server's default. */
  timeoutMs?: number;
  /** Most calls of this tool that may run at once; the server's own cap applies too. */
  maxConcurrency?: number;
  /**
   * What this tool's permission rules speak of: a path (`Read(src/**)`) or a command (`Bash(npm
   * test)`) inside the parentheses, and which path rules govern what it touches. Left out: its
   * rules are its name alone.
   */
  rules?: ToolRules;
  execute(input: Input, context: ToolContext): Promise<ToolResult> | ToolResult;
}
