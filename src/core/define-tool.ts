import type { Static, TObject } from 'typebox';
import type { ToolRules } from './permissions.js';
import type { ContentBlock, ObjectSchema, ToolAnnotations, ToolContext, ToolDef, ToolInput, ToolResult } from './types.js';

/**
 * What a tool with an output schema returns: on success, `structuredContent` of the schema's
 * type; with `isError: true`, text and at most optional structured content.
 */
export type TypedToolResult<Output> =
  { content: ContentBlock[]; isError?: false; structuredContent: Output } | { content: ContentBlock[]; isError: true; structuredContent?: Output };

/** A tool declaration whose input type follows from its TypeBox schema. */
export interface TypedToolSpec<Schema extends TObject> {
  name: string;
  description: string;
  inputSchema: Schema;
  /** Absent here: a tool with an output schema is a `TypedToolSpecWithOutput`. */
  outputSchema?: undefined;
  annotations?: ToolAnnotations;
  timeoutMs?: number;
  maxConcurrency?: number;
  rules?: ToolRules;
  execute(input: Static<Schema>, context: ToolContext): Promise<ToolResult> | ToolResult;
}

/** A tool declaration with an output schema too: `structuredContent` is typed by it. */
export interface TypedToolSpecWithOutput<Schema extends TObject, Output extends TObject> extends Omit<TypedToolSpec<Schema>, 'outputSchema' | 'execute'> {
  /** The schema of the result's `structuredContent`; see `ToolDef.outputSchema`. */
  outputSchema: Output;
  execute(input: Static<Schema>, context: ToolContext): Promise<TypedToolResult<Static<Output>>> | TypedToolResult<Static<Output>>;
}

/**
 * Declares a tool with TypeBox schemas: one declaration gives validation, the input's type and
 * the published schema, and with `outputSchema` the type of `structuredContent` too. The
 * pipeline validates input before `execute` runs, so the type holds; it checks structured
 * content against the output schema after, so a result that breaks it never reaches a client.
 */
export function defineTool<Schema extends TObject, Output extends TObject>(spec: TypedToolSpecWithOutput<Schema, Output>): ToolDef;
export function defineTool<Schema extends TObject>(spec: TypedToolSpec<Schema>): ToolDef;
export function defineTool(spec: TypedToolSpec<TObject> | TypedToolSpecWithOutput<TObject, TObject>): ToolDef {
  return spec as unknown as ToolDef<ToolInput> & { inputSchema: ObjectSchema };
}
