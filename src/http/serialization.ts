import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import type { FastifyServerOptions } from 'fastify';

type Serialize = (payload: unknown) => string;
type Compile = (route: { schema?: unknown; method: string; url: string; httpStatus: string }) => Serialize;

/** Fastify's own serializer factory (fast-json-stringify), which it uses when none is given. */
const buildFastJsonStringify = SerializerSelector() as unknown as (
  externalSchemas: unknown,
  options: unknown,
) => Compile;

/**
 * Fastify's response serializers, each compiled when its route first answers with that status
 * instead of at start (as the validators are, src/http/validation.ts): the 100-odd routes have
 * a serializer per documented status, and fast-json-stringify's generated code for all of them
 * took memory that a process answering a few routes never used.
 */
function buildLazySerializer(externalSchemas: unknown, options: unknown): Compile {
  const compile = buildFastJsonStringify(externalSchemas, options);
  return (route) => {
    let compiled: Serialize | undefined;
    return (payload) => {
      compiled ??= compile(route);
      return compiled(payload);
    };
  };
}

/** The factory typed as Fastify's server option expects it. */
export const lazySerializerFactory = buildLazySerializer as unknown as NonNullable<
  NonNullable<NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']>['buildSerializer']
>;
