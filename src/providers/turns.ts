import secureJson from 'secure-json-parse';
import { isRecord } from '../core/json.js';

// An assistant's turn, exactly as a model provider returned it, read as the tool calls it asks
// for. Transport-neutral: `POST /calls` uses it, and so can an embedder's own loop.

// Providers' ids are a few dozen characters, and tool names at most 64 (every provider's rule):
// longer ones are refused before they reach a log line or an answer.
const MAX_ID_CHARS = 256;
const MAX_NAME_CHARS = 64;

/** The provider shapes a turn can come in. */
export const DIALECTS = ['anthropic', 'openai', 'openai-responses'] as const;
export type Dialect = (typeof DIALECTS)[number];

/** One tool call of a turn. `problem` says why it cannot run; it is then answered as an error. */
export interface TurnCall {
  id: string;
  name: string;
  input: unknown;
  problem?: { kind: 'arguments-not-json' | 'name-too-long'; message: string };
}

export interface Turn {
  dialect: Dialect;
  calls: TurnCall[];
}

/** The turn is not in a shape this reads; the message says what was expected. */
export class TurnShapeError extends Error {
  override readonly name = 'TurnShapeError';
}

const EXPECTED: Record<Dialect, string> = {
  anthropic:
    'an Anthropic assistant message ({"role": "assistant", "content": [...]}), or its content array of blocks with tool_use blocks ({"type": "tool_use", "id", "name", "input"})',
  openai:
    'an OpenAI Chat Completions assistant message ({"role": "assistant", "tool_calls": [...]}), or its tool_calls array ({"id", "type": "function", "function": {"name", "arguments"}})',
  'openai-responses':
    'an OpenAI Responses API response ({"output": [...]}), or its output items with function_call items ({"type": "function_call", "call_id", "name", "arguments"})',
};

/** What a turn may look like, in words, for an error message. */
export function expectedShapes(): string {
  return DIALECTS.map((d) => `- ${d}: ${EXPECTED[d]}`).join('\n');
}

/**
 * Reads a turn: in `dialect` when given, else in the dialect its shape shows. Throws
 * `TurnShapeError` when the shape fits no dialect, more than one, or not the one given. Parts
 * of a turn that are not tool calls (text, thinking, reasoning, messages) are ignored.
 */
export function readTurn(body: unknown, dialect?: Dialect): Turn {
  const detected = dialect ?? detect(body);
  switch (detected) {
    case 'anthropic':
      return { dialect: detected, calls: anthropicCalls(body) };
    case 'openai':
      return { dialect: detected, calls: openAICalls(body) };
    case 'openai-responses':
      return { dialect: detected, calls: responsesCalls(body) };
  }
}

function detect(body: unknown): Dialect {
  const items = Array.isArray(body) ? body : undefined;
  if (items === undefined) {
    if (!isRecord(body)) throw new TurnShapeError(`The body must be a JSON object or array holding an assistant's turn; expected one of:\n${expectedShapes()}`);
    const keys = (['content', 'tool_calls', 'output'] as const).filter((k) => Array.isArray(body[k]));
    if (keys.length === 1) return ({ content: 'anthropic', tool_calls: 'openai', output: 'openai-responses' } as const)[keys[0]!];
    if (keys.length > 1)
      throw new TurnShapeError(
        `The turn is ambiguous: it has ${keys.map((k) => `"${k}"`).join(' and ')} arrays; send one of them, or say which with ?format=.`,
      );
    // An assistant message without tool calls (the model's final answer): nothing to run.
    if (body.role === 'assistant' && (typeof body.content === 'string' || body.content === null)) return 'openai';
    throw new TurnShapeError(`The body is not an assistant's turn: it has no "content", "tool_calls" or "output" array; expected one of:\n${expectedShapes()}`);
  }
  const seen = new Set<Dialect>();
  for (const item of items) {
    if (!isRecord(item)) continue;
    if (item.type === 'tool_use') seen.add('anthropic');
    else if (item.type === 'function_call') seen.add('openai-responses');
    else if (item.type === 'function' && isRecord(item.function)) seen.add('openai');
  }
  if (seen.size === 1) return [...seen][0]!;
  if (seen.size > 1)
    throw new TurnShapeError(
      `The turn is ambiguous: its items mix ${[...seen].join(' and ')} tool calls; send one provider's turn, or say which with ?format=.`,
    );
  if (items.length === 0) return 'anthropic';
  throw new TurnShapeError(
    `The array holds no tool call of any provider (tool_use, function_call, or a tool_calls entry); expected one of:\n${expectedShapes()}`,
  );
}

function anthropicCalls(body: unknown): TurnCall[] {
  const blocks = Array.isArray(body) ? body : isRecord(body) && Array.isArray(body.content) ? body.content : undefined;
  if (blocks === undefined) throw mismatch('anthropic', body);
  const calls: TurnCall[] = [];
  for (const [i, block] of blocks.entries()) {
    if (!isRecord(block) || typeof block.type !== 'string') throw new TurnShapeError(`content[${i}] must be a content block with a "type".`);
    if (block.type !== 'tool_use') continue;
    calls.push(call(`content[${i}]`, block.id, block.name, block.input, 'input'));
  }
  return calls;
}

function openAICalls(body: unknown): TurnCall[] {
  if (isRecord(body) && !Array.isArray(body.tool_calls) && body.role === 'assistant' && body.tool_calls == null) return [];
  const toolCalls = Array.isArray(body) ? body : isRecord(body) && Array.isArray(body.tool_calls) ? body.tool_calls : undefined;
  if (toolCalls === undefined) throw mismatch('openai', body);
  return toolCalls.map((item, i) => {
    const where = `tool_calls[${i}]`;
    if (!isRecord(item) || !isRecord(item.function))
      throw new TurnShapeError(`${where} must be {"id", "type": "function", "function": {"name", "arguments"}}.`);
    if (item.type !== 'function') throw new TurnShapeError(`${where} is of type ${JSON.stringify(item.type)}; only "function" tool calls can run here.`);
    return call(where, item.id, item.function.name, item.function.arguments, 'function.arguments', true);
  });
}

function responsesCalls(body: unknown): TurnCall[] {
  const items = Array.isArray(body) ? body : isRecord(body) && Array.isArray(body.output) ? body.output : undefined;
  if (items === undefined) throw mismatch('openai-responses', body);
  const calls: TurnCall[] = [];
  for (const [i, item] of items.entries()) {
    if (!isRecord(item) || typeof item.type !== 'string') throw new TurnShapeError(`output[${i}] must be an item with a "type".`);
    if (item.type !== 'function_call') continue;
    calls.push(call(`output[${i}]`, item.call_id, item.name, item.arguments, 'arguments', true));
  }
  return calls;
}

/** One call; its arguments are a JSON text for OpenAI's dialects, an object for Anthropic's. */
function call(where: string, id: unknown, name: unknown, args: unknown, argsKey: string, argsAreText = false): TurnCall {
  if (typeof id !== 'string' || id === '') throw new TurnShapeError(`${where} has no id: every tool call needs its id, to answer it.`);
  if (id.length > MAX_ID_CHARS) throw new TurnShapeError(`${where} has an id of ${id.length} characters; at most ${MAX_ID_CHARS} are taken.`);
  if (typeof name !== 'string' || name === '') throw new TurnShapeError(`${where} (${id}) has no tool name.`);
  if (name.length > MAX_NAME_CHARS) {
    const message = `Tool call ${id} names a tool of ${name.length} characters; tool names have at most ${MAX_NAME_CHARS}.`;
    return { id, name: `${name.slice(0, MAX_NAME_CHARS)}...`, input: undefined, problem: { kind: 'name-too-long', message } };
  }
  if (!argsAreText) return { id, name, input: args === undefined ? {} : args };
  if (typeof args !== 'string') throw new TurnShapeError(`${where} (${id}): ${argsKey} must be a JSON text, as the API returns it.`);
  try {
    // Refused as the REST body parser refuses them: keys a careless merge would turn into prototype pollution.
    return { id, name, input: args.trim() === '' ? {} : secureJson.parse(args, undefined, { protoAction: 'error', constructorAction: 'error' }) };
  } catch {
    return {
      id,
      name,
      input: undefined,
      problem: {
        kind: 'arguments-not-json',
        message: `The arguments of tool call ${id} are not valid JSON (or hold a __proto__ or constructor.prototype key); send the call again with a JSON object of arguments.`,
      },
    };
  }
}

function mismatch(dialect: Dialect, body: unknown): TurnShapeError {
  const got = Array.isArray(body)
    ? 'an array'
    : isRecord(body)
      ? `an object with keys ${
          Object.keys(body)
            .slice(0, 8)
            .map((k) => JSON.stringify(k))
            .join(', ') || '(none)'
        }`
      : typeof body;
  return new TurnShapeError(`Not a turn in the ${dialect} format: got ${got}; expected ${EXPECTED[dialect]}.`);
}
