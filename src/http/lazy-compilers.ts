import { AjvCompiler, type ValidatorFactory } from '@fastify/ajv-compiler';
import { SerializerSelector, type SerializerFactory } from '@fastify/fast-json-stringify-compiler';

type AjvCompile = ReturnType<ValidatorFactory>;
type Validate = ReturnType<AjvCompile>;

/**
 * Fastify's own compilers (Ajv for request parts, fast-json-stringify for responses), each route's
 * schema compiled on the route's first request rather than all of them before the server listens.
 * At start-up they cost an Ajv instance with its meta-schema and a serialiser per response
 * schema, about 40 ms, for routes most servers rarely call (/docs, /calls, errors). A schema that
 * does not compile now fails its route's first request, not start-up; the tests call every route.
 * Fastify normalises header schemas only for its default compiler; no route declares headers.
 */
export function lazySchemaCompilers(): { buildValidator: ValidatorFactory; buildSerializer: SerializerFactory } {
  const buildValidator: ValidatorFactory = (externalSchemas, options) => {
    let compile: AjvCompile | undefined;
    return (route) => {
      let validate: Validate | undefined;
      // Fastify reads the errors off the function it was given.
      const lazy = ((data: unknown) => {
        validate ??= (compile ??= AjvCompiler()(externalSchemas, options))(route);
        const valid = validate(data);
        lazy.errors = validate.errors;
        return valid;
      }) as Validate;
      return lazy;
    };
  };
  const buildSerializer: SerializerFactory = (externalSchemas, options) => {
    let compile: ReturnType<SerializerFactory> | undefined;
    return (route) => {
      let serialize: ((doc: unknown) => string) | undefined;
      return (doc) => (serialize ??= (compile ??= SerializerSelector()(externalSchemas, options))(route))(doc);
    };
  };
  return { buildValidator, buildSerializer };
}
