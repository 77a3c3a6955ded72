import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { ObjectSchema, ToolInput } from './types.js';

// ajv-formats ships CommonJS with a default export that NodeNext sees as the module object.
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

/**
 * Tool input is validated as sent: every error reported, no type coercion, no removal of unknown
 * properties, no defaults filled in. Non-strict so hand-written schemas may carry annotations
 * (`examples`, `$comment`, vendor keywords) without failing to compile.
 */
export function createAjv(): Ajv {
  return addFormats(new Ajv({ allErrors: true, coerceTypes: false, removeAdditional: false, useDefaults: false, strict: false }));
}

export type InputValidator = ValidateFunction<ToolInput>;

/** Compiles a tool's input schema; throws Ajv's own error when the schema is invalid. */
export function compileInputSchema(schema: ObjectSchema, ajv: Ajv = createAjv()): InputValidator {
  return ajv.compile<ToolInput>(schema);
}

/** One violation of a tool's input schema, addressed by JSON path (`$.path.to.field`). */
export interface InputViolation {
  path: string;
  message: string;
}

/** Turns Ajv's errors into violations a model can act on: a JSON path and a plain message. */
export function describeViolations(errors: readonly ErrorObject[]): InputViolation[] {
  return errors.map((e) => {
    let path = jsonPath(e.instancePath);
    let message = e.message ?? 'is invalid';
    if (e.keyword === 'additionalProperties') {
      const extra = String((e.params as { additionalProperty: string }).additionalProperty);
      path = appendProperty(path, extra);
      message = 'is not an allowed property';
    } else if (e.keyword === 'required') {
      const missing = String((e.params as { missingProperty: string }).missingProperty);
      path = appendProperty(path, missing);
      message = 'is required';
    } else if (e.keyword === 'enum') {
      const allowed = (e.params as { allowedValues: unknown[] }).allowedValues;
      message = `must be one of ${allowed.map((v) => JSON.stringify(v)).join(', ')}`;
    }
    return { path, message };
  });
}

function jsonPath(pointer: string): string {
  if (pointer === '') return '$';
  return pointer
    .split('/')
    .slice(1)
    .map((token) => token.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce((path, key) => appendKey(path, key), '$');
}

/** A JSON Pointer token may be an array index or a property; digits are taken as an index. */
function appendKey(path: string, key: string): string {
  if (/^\d+$/.test(key)) return `${path}[${key}]`;
  return appendProperty(path, key);
}

/** A key known to be an object property, even when it is made of digits. */
function appendProperty(path: string, key: string): string {
  if (/^[A-Za-z_$][\w$]*$/.test(key)) return `${path}.${key}`;
  return `${path}[${JSON.stringify(key)}]`;
}
