import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import type { LightMyRequestResponse } from 'fastify';

type OpenApiDoc = {
  paths: Record<
    string,
    Record<string, { responses?: Record<string, { content?: Record<string, { schema: unknown }> }> }>
  >;
  components?: { schemas?: Record<string, unknown> };
};

/**
 * Checks answers against the response schemas of the served OpenAPI document, so that the
 * document cannot drift from the behaviour: every answer a test receives goes through here.
 */
export class ContractChecker {
  readonly #doc: OpenApiDoc;
  readonly #ajv: Ajv2020;
  readonly #routes: { method: string; pattern: RegExp; path: string }[];
  readonly #validators = new Map<string, ReturnType<Ajv2020['compile']>>();

  constructor(doc: OpenApiDoc) {
    this.#doc = doc;
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    (addFormats as unknown as (ajv: unknown) => void)(ajv);
    ajv.addSchema({ $id: 'openapi', components: doc.components ?? {} });
    this.#ajv = ajv;
    this.#routes = [];
    for (const [path, methods] of Object.entries(doc.paths)) {
      const pattern = new RegExp(`^${path.replace(/\{[^}]+\}/g, '[^/]+')}$`);
      for (const method of Object.keys(methods))
        this.#routes.push({ method: method.toUpperCase(), pattern, path });
    }
  }

  /** Throws when the answer's body does not match the documented schema for its status. */
  check(method: string, url: string, response: LightMyRequestResponse): void {
    const path = url.split('?')[0] ?? url;
    const route = this.#routes.find((r) => r.method === method.toUpperCase() && r.pattern.test(path));
    if (!route) {
      // Undocumented addresses answer 404 unknown_endpoint / 405; those have no schema to meet.
      if (response.statusCode === 404 || response.statusCode === 405) return;
      throw new Error(`${method} ${path} answered ${response.statusCode} but is not in the OpenAPI document`);
    }
    const responses = this.#doc.paths[route.path]?.[method.toLowerCase()]?.responses ?? {};
    const status = String(response.statusCode);
    const documented = responses[status] ?? responses[`${status[0]}XX`] ?? responses.default;
    if (!documented) {
      throw new Error(`${method} ${route.path}: status ${status} is not documented`);
    }
    const contentType = String(response.headers['content-type'] ?? '');
    const content = documented.content;
    if (!content || !contentType.includes('json')) return;
    const schema = content['application/json']?.schema;
    if (!schema) return;
    const cacheKey = `${method} ${route.path} ${status}`;
    let validate = this.#validators.get(cacheKey);
    if (!validate) {
      const rewritten = JSON.parse(
        JSON.stringify(schema).replaceAll('"#/components/', '"openapi#/components/'),
      );
      validate = this.#ajv.compile(rewritten);
      this.#validators.set(cacheKey, validate);
    }
    const body = response.body === '' ? undefined : JSON.parse(response.body);
    if (!validate(body)) {
      throw new Error(
        `${method} ${route.path} ${status}: body does not match the documented schema: ${this.#ajv.errorsText(validate.errors)}\n${response.body.slice(0, 500)}`,
      );
    }
  }
}
