import { isDeepStrictEqual } from 'node:util';
import { isRecord } from '../../core/json.js';

/** A schema as `app.addSchema` takes it: named by its `$id`. */
export type NamedSchema = Record<string, unknown> & { $id: string };

// Keywords whose values are data, not schemas: never searched for named schemas.
const DATA_KEYWORDS = new Set(['enum', 'const', 'default', 'examples', 'example']);

/**
 * Every schema with an `$id` among `roots` and nested inside them, once each, with each nested
 * named schema replaced by a reference to it (`{ $ref: '<$id>' }`), ready for `app.addSchema`.
 *
 * The core declares its contracts inline, so one declaration gives the TypeScript type, the
 * validator and the document. @fastify/swagger, given such a schema, publishes a nested named
 * schema as a component but also repeats it inline where it is used, so generated clients would
 * name one type twice (`TextBlock` and `ToolResultContentItemAnyOf0`); references make every use
 * the component. Throws when two different schemas carry the same `$id`.
 */
export function namedSchemas(roots: readonly object[]): NamedSchema[] {
  const found = new Map<string, { original: object; named: NamedSchema }>();

  const visit = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(visit);
    if (!isRecord(node)) return node;
    if (typeof node.$id === 'string') {
      add(node as NamedSchema);
      return { $ref: node.$id };
    }
    return copyOf(node);
  };
  const copyOf = (node: Record<string, unknown>): Record<string, unknown> => {
    const copy: Record<string, unknown> = {};
    for (const [keyword, value] of Object.entries(node)) copy[keyword] = DATA_KEYWORDS.has(keyword) ? value : visit(value);
    return copy;
  };
  const add = (schema: NamedSchema): void => {
    const known = found.get(schema.$id);
    if (known !== undefined) {
      if (known.original !== schema && !isDeepStrictEqual({ ...known.original }, { ...schema })) {
        throw new Error(`Two different schemas are named ${schema.$id}.`);
      }
      return;
    }
    // Registered before its children are visited, so a schema that contains itself ends.
    const entry = { original: schema, named: { $id: schema.$id } as NamedSchema };
    found.set(schema.$id, entry);
    entry.named = copyOf(schema) as NamedSchema;
  };

  for (const root of roots) {
    if (!isRecord(root) || typeof root.$id !== 'string') throw new Error('Every root schema needs an $id.');
    add(root as NamedSchema);
  }
  return [...found.values()].map((entry) => entry.named);
}
