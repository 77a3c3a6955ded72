import type { Static, TObject } from 'typebox';
import type { ObjectSchema, ToolAnnotations, ToolContext, ToolDef, ToolInput, ToolResult } from './types.js';

/** A tool declaration whose input type follows from its TypeBox schema. */
export interface TypedToolSpec<Schema extends TObject> {
  name: string;
  description: string;
  inputSchema: Schema;
  annotations?: ToolAnnotations;
  timeoutMs?: number;
  maxConcurrency?: number;
  execute(input: Static<Schema>, context: ToolContext): Promise<ToolResult> | ToolResult;
}

/**
 * Declares a tool with a TypeBox schema: one declaration gives validation, the input's type and
 * the published schema. The pipeline validates input before `execute` runs, so the type holds.
 */
export function defineTool<Schema extends TObject>(spec: TypedToolSpec<Schema>): ToolDef {
  return spec as unknown as ToolDef<ToolInput> & { inputSchema: ObjectSchema };
}
