import { ToolRegistrationError } from '../errors.js';
import { inputValidatorOf, outputValidatorOf, type InputValidator, type OutputValidator } from '../validator.js';
import type { ToolDef } from '../types.js';
import type { ToolSchemas } from './compile.js';
import type { ListingOutcome } from './thread.js';
import { lazyForms } from './load.js';

/** A tool of a source's listing, once checked: refused, keeping what an earlier entry compiled, or compiling. */
export type Slot<Earlier> =
  { tool: ToolDef; refused: string } | { tool: ToolDef; earlier: Earlier } | { tool: ToolDef; compiles: number; outputRule: string | undefined };

/**
 * Sorts a listing's tools, compiling nothing: `checkRules` refuses a tool (throwing
 * `ToolRegistrationError`) or passes it; a tool in `reusable` keeps its validators; the schemas of
 * the others, in order, are what the compiler gets. An output schema whose root breaks MCP's rule is
 * not sent: the tool will be refused for it, once its input schema compiled.
 */
export function planListing<Earlier>(
  tools: readonly ToolDef[],
  checkRules: (tool: ToolDef) => void,
  reusable: ReadonlyMap<string, Earlier>,
): { slots: Array<Slot<Earlier>>; listing: ToolSchemas[] } {
  const listing: ToolSchemas[] = [];
  const slots = tools.map((tool): Slot<Earlier> => {
    try {
      checkRules(tool);
    } catch (err) {
      if (!(err instanceof ToolRegistrationError)) throw err;
      return { tool, refused: err.message };
    }
    const earlier = reusable.get(tool.name);
    if (earlier !== undefined) return { tool, earlier };
    const outputRule = tool.outputSchema === undefined ? undefined : outputRootRule(tool.outputSchema);
    listing.push({ input: tool.inputSchema, output: outputRule === undefined ? tool.outputSchema : undefined });
    return { tool, compiles: listing.length - 1, outputRule };
  });
  return { slots, listing };
}

/**
 * The validators of a compiling slot's tool, from what the compiler made of the listing; throws
 * `ToolRegistrationError` with the reason `replaceSource` would give, in the order it checks.
 */
export function validatorsOf(
  slot: { tool: ToolDef; compiles: number; outputRule: string | undefined },
  outcome: ListingOutcome,
): { validate: InputValidator; checkOutput: OutputValidator | undefined } {
  const { name } = slot.tool;
  if ('failed' in outcome) throw new ToolRegistrationError(name, `its schemas were not compiled: ${outcome.failed}`);
  const { input, output } = outcome.compilations[slot.compiles]!;
  if ('error' in input) throw new ToolRegistrationError(name, `the input schema does not compile: ${input.error}`);
  if (slot.outputRule !== undefined) throw new ToolRegistrationError(name, slot.outputRule);
  if (output !== undefined && 'error' in output) throw new ToolRegistrationError(name, `the output schema does not compile: ${output.error}`);
  return {
    validate: inputValidatorOf(slot.tool.inputSchema, lazyForms(input.forms)),
    checkOutput: output === undefined ? undefined : outputValidatorOf(lazyForms(output.forms)),
  };
}

/** The rule an output schema breaks before it is compiled (MCP's: its root an object), if any. */
export function outputRootRule(schema: unknown): string | undefined {
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema) || (schema as { type?: unknown }).type !== 'object') {
    return 'the output schema\'s root must be { "type": "object" }';
  }
  return undefined;
}
