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
const ajv = addFormats(
  new Ajv({ allErrors: true, coerceTypes: false, removeAdditional: false, useDefaults: false, strict: false }),
);

export type InputValidator = ValidateFunction<ToolInput>;

/** Compiles a tool's input schema; throws Ajv's own error when the schema is invalid. */
export function compileInputSchema(schema: ObjectSchema): InputValidator {
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
      path = appendKey(path, extra);
      message = 'is not an allowed property';
    } else if (e.keyword === 'required') {
      const missing = String((e.params as { missingProperty: string }).missingProperty);
      path = appendKey(path, missing);
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

function appendKey(path: string, key: string): string {
  if (/^\d+$/.test(key)) return `${path}[${key}]`;
  if (/^[A-Za-z_$][\w$]*$/.test(key)) return `${path}.${key}`;
  return `${path}[${JSON.stringify(key)}]`;
}
