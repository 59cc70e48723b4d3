import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import type { LightMyRequestResponse } from 'fastify';

export type JsonSchema = Record<string, any>;

export interface OpenApiParameter {
  name: string;
  in: 'path' | 'query' | 'header' | 'cookie';
  required?: boolean;
  schema: JsonSchema;
  description?: string;
}

export interface OpenApiOperation {
  description?: string;
  security?: Record<string, string[]>[];
  parameters?: OpenApiParameter[];
  requestBody?: { required?: boolean; content: Record<string, { schema: JsonSchema }> };
  responses?: Record<string, { description?: string; content?: Record<string, { schema?: JsonSchema }> }>;
}

export type OpenApiDoc = {
  paths: Record<string, Record<string, OpenApiOperation>>;
  components?: { schemas?: Record<string, JsonSchema>; securitySchemes?: Record<string, JsonSchema> };
};

/** Whether a media type (no parameters) is covered by a documented key such as `text/*`. */
export function mediaTypeMatches(documented: string, actual: string): boolean {
  const [type, subtype] = documented.toLowerCase().split('/');
  const [actualType, actualSubtype] = actual.toLowerCase().split('/');
  return (type === '*' || type === actualType) && (subtype === '*' || subtype === actualSubtype);
}

/** An Ajv that knows the document's components, so `#/components/...` references resolve. */
export function documentAjv(doc: OpenApiDoc): Ajv2020 {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  (addFormats as unknown as (ajv: unknown) => void)(ajv);
  ajv.addSchema({ $id: 'openapi', components: doc.components ?? {} });
  return ajv;
}

/** A schema of the document made compilable by documentAjv (references point at its components). */
export function compilableSchema(schema: unknown): JsonSchema {
  return JSON.parse(JSON.stringify(schema).replaceAll('"#/components/', '"openapi#/components/'));
}

/**
 * Checks answers against the responses of the served OpenAPI document, so that the document
 * cannot drift from the behaviour: every answer a test receives goes through here. The status
 * must be documented, the content type must be one the document lists for it (no body where it
 * lists none), and a JSON body must match the documented schema.
 */
export class ContractChecker {
  readonly #doc: OpenApiDoc;
  readonly #ajv: Ajv2020;
  readonly #routes: { method: string; pattern: RegExp; path: string }[];
  readonly #validators = new Map<string, ReturnType<Ajv2020['compile']>>();

  constructor(doc: OpenApiDoc) {
    this.#doc = doc;
    this.#ajv = documentAjv(doc);
    this.#routes = [];
    for (const [path, methods] of Object.entries(doc.paths)) {
      const pattern = new RegExp(`^${path.replace(/\{[^}]+\}/g, '[^/]+')}$`);
      for (const method of Object.keys(methods))
        this.#routes.push({ method: method.toUpperCase(), pattern, path });
    }
  }

  /** Throws when the answer does not match the document. */
  check(method: string, url: string, response: LightMyRequestResponse): void {
    const problem = this.problem(method, url, response);
    if (problem) throw new Error(problem);
  }

  /** What is wrong with the answer against the document, or undefined when it matches. */
  problem(method: string, url: string, response: LightMyRequestResponse): string | undefined {
    const path = url.split('?')[0] ?? url;
    const route = this.#routes.find((r) => r.method === method.toUpperCase() && r.pattern.test(path));
    if (!route) {
      // Undocumented addresses answer 404 unknown_endpoint / 405; those have no schema to meet.
      if (response.statusCode === 404 || response.statusCode === 405) return undefined;
      return `${method} ${path} answered ${response.statusCode} but is not in the OpenAPI document`;
    }
    const responses = this.#doc.paths[route.path]?.[method.toLowerCase()]?.responses ?? {};
    const status = String(response.statusCode);
    const documented = responses[status] ?? responses[`${status[0]}XX`] ?? responses.default;
    if (!documented) return `${method} ${route.path}: status ${status} is not documented`;
    const contentType = String(response.headers['content-type'] ?? '');
    const mediaType = contentType.split(';')[0]?.trim() ?? '';
    const content = documented.content;
    if (!content || Object.keys(content).length === 0) {
      if (response.rawPayload.length > 0)
        return `${method} ${route.path} ${status}: the document lists no body, the answer has ${response.rawPayload.length} bytes of ${contentType || 'no content type'}`;
      return undefined;
    }
    const documentedType = Object.keys(content).find((key) => mediaTypeMatches(key, mediaType));
    if (!documentedType) {
      return `${method} ${route.path} ${status}: content type ${contentType || '(none)'} is not among the documented ${Object.keys(content).join(', ')}`;
    }
    if (!mediaType.includes('json')) return undefined;
    const schema = content[documentedType]?.schema;
    if (!schema) return undefined;
    const cacheKey = `${method} ${route.path} ${status} ${documentedType}`;
    let validate = this.#validators.get(cacheKey);
    if (!validate) {
      validate = this.#ajv.compile(compilableSchema(schema));
      this.#validators.set(cacheKey, validate);
    }
    let body: unknown;
    try {
      body = response.body === '' ? undefined : JSON.parse(response.body);
    } catch {
      return `${method} ${route.path} ${status}: the body is not JSON although the content type is ${contentType}`;
    }
    if (!validate(body)) {
      return `${method} ${route.path} ${status}: body does not match the documented schema: ${this.#ajv.errorsText(validate.errors)}\n${response.body.slice(0, 500)}`;
    }
    return undefined;
  }
}
