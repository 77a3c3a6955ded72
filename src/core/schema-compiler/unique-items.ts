import { _, str, type CodeKeywordDefinition, type SchemaValidateFunction } from 'ajv';
import { LINEAR_UNIQUE_ITEMS } from '../unique-items.js';

const linearCheck = LINEAR_UNIQUE_ITEMS.validate as SchemaValidateFunction;

/**
 * The first duplicate in `items`, as `[j, i]` (item `i` equals the earlier item `j`), found in one
 * pass (see unique-items.ts); undefined when every item is unique. The name that standalone
 * validator code calls it by is its `code` (see load.ts).
 */
export const firstDuplicate = Object.assign(
  (items: unknown[]): [number, number] | undefined => {
    if (linearCheck(true, items) === true) return undefined;
    const { i, j } = linearCheck.errors![0]!.params as { i: number; j: number };
    return [j, i];
  },
  { code: 'linearUniqueItems' },
);

/**
 * `uniqueItems` in linear time, as code Ajv generates rather than a function it calls: a function
 * keyword has no code of its own, so Ajv cannot write it into standalone validators, and a source's
 * schemas are compiled to standalone code in a worker thread (see schema-compiler.ts). Same errors as
 * Ajv's own keyword.
 */
export const LINEAR_UNIQUE_ITEMS_CODE: CodeKeywordDefinition = {
  keyword: 'uniqueItems',
  type: 'array',
  schemaType: 'boolean',
  error: {
    message: ({ params: { i, j } }) => str`must NOT have duplicate items (items ## ${j} and ${i} are identical)`,
    params: ({ params: { i, j } }) => _`{i: ${i}, j: ${j}}`,
  },
  code(cxt) {
    if (cxt.schema !== true) return;
    const { gen, data } = cxt;
    const find = gen.scopeValue('func', { ref: firstDuplicate, code: _`linearUniqueItems` });
    const duplicate = gen.const('duplicate', _`${find}(${data})`);
    cxt.setParams({ i: _`${duplicate}[1]`, j: _`${duplicate}[0]` });
    cxt.fail(_`${duplicate} !== undefined`);
  },
};
