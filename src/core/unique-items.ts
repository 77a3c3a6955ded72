import type { FuncKeywordDefinition, SchemaValidateFunction } from 'ajv';

/**
 * `uniqueItems` in time linear in the array: Ajv's own compares every pair of items unless their
 * schema declares them scalar, and 40,000 one-element arrays (300 KB) held the event loop for 11 s.
 * Each item gets an identity shared by every item deep-equal to it (as Ajv's `equal` has it: the
 * same keys in any order, arrays in order), so one pass finds the first duplicate.
 */
const linearUniqueItems: SchemaValidateFunction = (unique: boolean, items: unknown[]): boolean => {
  if (!unique) return true;
  const identities = new Identities();
  const seen = new Map<number, number>();
  for (const [i, item] of items.entries()) {
    const identity = identities.of(item);
    const j = seen.get(identity);
    if (j !== undefined) {
      // Ajv empties `errors` before each call and reads it after a failure.
      linearUniqueItems.errors = [
        { keyword: 'uniqueItems', params: { i, j }, message: `must NOT have duplicate items (items ## ${j} and ${i} are identical)` },
      ];
      return false;
    }
    seen.set(identity, i);
  }
  return true;
};
/** The keyword, in place of Ajv's, for schemas toolport did not write (see `createAjv`). */
export const LINEAR_UNIQUE_ITEMS: FuncKeywordDefinition = {
  keyword: 'uniqueItems',
  type: 'array',
  schemaType: 'boolean',
  errors: true,
  validate: linearUniqueItems,
};

/**
 * Gives each JSON value a number that every value deep-equal to it shares. A value's key is made
 * of its parts' numbers, not their text, so it costs its own size however deeply it nests (a
 * nesting too deep for the stack throws a RangeError, which the validators report as such).
 */
class Identities {
  // A scalar is its own key; an array's or object's is text, kept apart so no string can pose as one.
  readonly #scalars = new Map<unknown, number>();
  readonly #composites = new Map<string, number>();

  of(value: unknown): number {
    if (typeof value !== 'object' || value === null) return this.#number(this.#scalars, value);
    let key: string;
    if (Array.isArray(value)) {
      key = '[';
      for (const item of value) key += `${this.of(item)},`;
    } else {
      key = '{';
      for (const name of Object.keys(value).sort()) key += `${JSON.stringify(name)}:${this.of((value as Record<string, unknown>)[name])},`;
    }
    return this.#number(this.#composites, key);
  }

  #number<K>(numbers: Map<K, number>, key: K): number {
    let number = numbers.get(key);
    if (number === undefined) numbers.set(key, (number = this.#scalars.size + this.#composites.size));
    return number;
  }
}
