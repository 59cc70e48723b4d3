import type { Ajv2020 } from 'ajv/dist/2020.js';
import fc from 'fast-check';
import { compilableSchema, type JsonSchema } from '../helpers/contract.ts';

/**
 * fast-check arbitraries for the JSON Schema subset the OpenAPI document uses, and the
 * single-rule breaks of a valid value. Everything generated is checked with Ajv against the
 * schema it came from, so a gap in this converter shows as an error here, never as a request
 * that claims to be valid and is not.
 */

export type PathSegment = string | number;

export interface GenerationHints {
  /** Realistic values by property name, offered beside generated ones where they meet the schema. */
  values: Record<string, unknown[]>;
  /** Keys and values offered for objects that admit undeclared keys (entity field values). */
  freeForm: Record<string, unknown[]>;
  /** Addresses of the local file server: every URL the generator writes is one of these. */
  urls: string[];
}

/** A value that breaks exactly one rule the schema states. */
export interface Mutation {
  /** Where the rule applies, from the root of the value. */
  path: PathSegment[];
  /** The rule, as the document states it, e.g. `maxLength 100`. */
  rule: string;
  /** The reason a 422 detail should name for it (decisions §3), where one is decided. */
  reason?: 'invalid_type' | 'required';
  value: unknown;
}

/** An `if`/`then` pair of a schema. */
interface Condition {
  condition: JsonSchema;
  consequence: JsonSchema;
}

export interface ArbitraryOptions {
  /** Every declared property present and hinted values preferred: the base for mutations. */
  full?: boolean;
  /** Fixed generators for some locations (dotted path), e.g. the real id of a path parameter. */
  fixed?: Record<string, fc.Arbitrary<unknown>>;
  /** Locations whose strings travel in an HTTP header: printable ASCII without edge spaces. */
  headerPrefix?: string;
}

const MAX_GENERATED_STRING = 40;
const MAX_GENERATED_ITEMS = 3;
/** Generated values in a row that fail their own schema before the generator gives up. */
const MAX_REJECTED_IN_A_ROW = 2000;

const JSON_TYPE_NAMES = ['string', 'integer', 'number', 'boolean', 'array', 'object', 'null'] as const;

function jsonTypeOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}

export function getAt(root: unknown, path: PathSegment[]): unknown {
  let current: any = root;
  for (const segment of path) current = current?.[segment];
  return current;
}

/** A copy of root with the value at path replaced (or removed when value is `REMOVE`). */
export const REMOVE = Symbol('remove');
export function setAt(root: unknown, path: PathSegment[], value: unknown): unknown {
  if (path.length === 0) return value === REMOVE ? undefined : value;
  const copy: any = structuredClone(root);
  const parent = getAt(copy, path.slice(0, -1)) as any;
  const last = path[path.length - 1] as PathSegment;
  if (value === REMOVE) {
    if (Array.isArray(parent)) parent.splice(last as number, 1);
    else delete parent[last];
  } else if (last === '__proto__') {
    Object.defineProperty(parent, last, { value, enumerable: true, writable: true, configurable: true });
  } else {
    parent[last] = value;
  }
  return copy;
}

/**
 * `arbitrary.filter(predicate)` that fails loudly after MAX_REJECTED_IN_A_ROW refused values in
 * a row, instead of filtering for ever (fast-check's filter retries without end).
 */
function bounded<T>(
  arbitrary: fc.Arbitrary<T>,
  predicate: (value: T) => boolean,
  why: (value: T) => string,
): fc.Arbitrary<T> {
  let rejectedInARow = 0;
  return arbitrary.filter((value) => {
    if (predicate(value)) {
      rejectedInARow = 0;
      return true;
    }
    if (++rejectedInARow >= MAX_REJECTED_IN_A_ROW) {
      rejectedInARow = 0;
      throw new Error(`the generator made ${MAX_REJECTED_IN_A_ROW} values in a row that ${why(value)}`);
    }
    return false;
  });
}

export class SchemaArbitraries {
  readonly #ajv: Ajv2020;
  readonly #components: Record<string, JsonSchema>;
  readonly #hints: GenerationHints;
  readonly #validators = new WeakMap<object, ReturnType<Ajv2020['compile']>>();

  constructor(ajv: Ajv2020, components: Record<string, JsonSchema>, hints: GenerationHints) {
    this.#ajv = ajv;
    this.#components = components;
    this.#hints = hints;
  }

  resolve(schema: JsonSchema): JsonSchema {
    let current = schema;
    for (let depth = 0; typeof current?.$ref === 'string' && depth < 20; depth++) {
      const match = /^#\/components\/schemas\/(.+)$/.exec(current.$ref);
      const target = match ? this.#components[match[1] as string] : undefined;
      if (!target) throw new Error(`unresolvable reference ${current.$ref}`);
      current = target;
    }
    return current;
  }

  isValid(schema: JsonSchema, value: unknown): boolean {
    let validate = this.#validators.get(schema);
    if (!validate) {
      validate = this.#ajv.compile(compilableSchema(schema));
      this.#validators.set(schema, validate);
    }
    return validate(value) as boolean;
  }

  /**
   * Values valid against the schema. A schema the converter cannot meet fails loudly after
   * MAX_REJECTED_IN_A_ROW generated values, instead of filtering for ever.
   */
  arbitrary(schema: JsonSchema, options: ArbitraryOptions = {}): fc.Arbitrary<unknown> {
    return bounded(
      this.#arbitrary(schema, [], undefined, options),
      (value) => this.isValid(schema, value),
      (value) =>
        `the schema refuses, e.g. ${JSON.stringify(value)?.slice(0, 300)}: ${JSON.stringify(this.#validators.get(schema)?.errors?.slice(0, 3))}`,
    );
  }

  /**
   * One schema for a value that meets both: the second's keywords over the first's, required
   * keys and properties combined (an `enum` narrows to the values the first schema allows).
   */
  merge(first: JsonSchema, second: JsonSchema): JsonSchema {
    const a = this.resolve(first);
    const b = this.resolve(second);
    if (Array.isArray(b.enum)) return { enum: b.enum.filter((value: unknown) => this.isValid(a, value)) };
    const merged: JsonSchema = { ...a, ...b };
    if (a.required || b.required)
      merged.required = [...new Set([...(a.required ?? []), ...(b.required ?? [])])];
    if (a.properties && b.properties) {
      merged.properties = { ...a.properties };
      for (const [key, schema] of Object.entries(b.properties as Record<string, JsonSchema>)) {
        merged.properties[key] = a.properties[key] ? this.merge(a.properties[key], schema) : schema;
      }
    }
    return merged;
  }

  /** The schema without its `allOf`, merged into it; `if`/`then` pairs kept aside as conditions. */
  #flatten(schema: JsonSchema): { schema: JsonSchema; conditions: Condition[] } {
    const conditions: Condition[] = [];
    const { allOf, if: condition, then: consequence, ...rest } = schema;
    let flat: JsonSchema = rest;
    if (condition !== undefined) conditions.push({ condition, consequence: consequence ?? {} });
    for (const part of (allOf ?? []) as JsonSchema[]) {
      const inner = this.#flatten(this.resolve(part));
      flat = this.merge(flat, inner.schema);
      conditions.push(...inner.conditions);
    }
    return { schema: flat, conditions };
  }

  #arbitrary(
    schemaIn: JsonSchema,
    path: PathSegment[],
    name: string | undefined,
    options: ArbitraryOptions,
  ): fc.Arbitrary<unknown> {
    const fixed = options.fixed?.[path.join('.')];
    if (fixed) return fixed;
    const schema = this.resolve(schemaIn);
    const generated = this.#core(schema, path, name, options);
    const hinted = (name === undefined ? [] : (this.#hints.values[name] ?? [])).filter((value) =>
      this.isValid(schema, value),
    );
    if (hinted.length === 0) return generated;
    if (options.full) return fc.constantFrom(...hinted);
    // Mostly the world's real values, so that requests also get past the data to the happy path.
    return fc.oneof(
      { weight: 1, arbitrary: generated },
      { weight: 3, arbitrary: fc.constantFrom(...hinted) },
    );
  }

  #core(
    schema: JsonSchema,
    path: PathSegment[],
    name: string | undefined,
    options: ArbitraryOptions,
  ): fc.Arbitrary<unknown> {
    if (schema.dependentRequired || schema.dependentSchemas) {
      throw new Error(`schema keyword not supported by the generator at ${path.join('.')}`);
    }
    if (schema.allOf || schema.if) {
      // A value of the merged schema, then, for each condition it meets, the properties the
      // condition's consequence names generated again under the consequence.
      const { schema: flat, conditions } = this.#flatten(schema);
      const base = this.#core(flat, path, name, options);
      if (conditions.length === 0) return base;
      return base.chain((value) => {
        const met = conditions
          .filter((c) => this.isValid(c.condition, value))
          .map((c) => this.resolve(c.consequence));
        if (met.length === 0 || value === null || typeof value !== 'object' || Array.isArray(value)) {
          return fc.constant(value);
        }
        const consequence = met.reduce((all, then) => this.merge(all, then), { type: 'object' });
        const narrowed = this.merge(flat, consequence);
        const model: Record<string, fc.Arbitrary<unknown>> = {};
        const requiredKeys: string[] = [];
        for (const key of Object.keys(consequence.properties ?? {})) {
          const present = Object.hasOwn(value, key);
          if (!present && !(consequence.required ?? []).includes(key)) continue;
          model[key] = this.#arbitrary(narrowed.properties[key], [...path, key], key, options);
          requiredKeys.push(key);
        }
        return fc.record(model, { requiredKeys }).map((regenerated) => ({ ...value, ...regenerated }));
      });
    }
    if (schema.not) {
      const { not: excluded, ...rest } = schema;
      // `not: {}` admits nothing; a property so marked is never generated (see #object).
      return bounded(
        this.#core(rest, path, name, options),
        (value) => !this.isValid(excluded, value),
        () => `a \`not\` at ${path.join('.')} refuses`,
      );
    }
    if (schema.const !== undefined) return fc.constant(schema.const);
    if (Array.isArray(schema.enum)) return fc.constantFrom(...schema.enum);
    const branches = schema.anyOf ?? schema.oneOf;
    if (Array.isArray(branches)) {
      // Branches that only add constraints (e.g. `anyOf: [{required: [a]}, {required: [b]}]`
      // beside `type` and `properties`) are read together with the schema around them.
      const { anyOf: _anyOf, oneOf: _oneOf, description: _description, ...around } = schema;
      const hasAround = Object.keys(around).length > 0;
      return fc.oneof(
        ...branches.map((branch: JsonSchema) =>
          hasAround
            ? this.#core(this.merge(around, branch), path, name, options)
            : this.#arbitrary(branch, path, name, options),
        ),
      );
    }
    const types: string[] = Array.isArray(schema.type)
      ? schema.type
      : schema.type
        ? [schema.type]
        : schema.properties
          ? ['object']
          : [];
    if (types.length === 0) return fc.jsonValue({ maxDepth: 2 });
    return fc.oneof(...types.map((type) => this.#ofType(type, schema, path, name, options)));
  }

  #ofType(
    type: string,
    schema: JsonSchema,
    path: PathSegment[],
    name: string | undefined,
    options: ArbitraryOptions,
  ): fc.Arbitrary<unknown> {
    switch (type) {
      case 'string':
        return this.#string(
          schema,
          name,
          options.headerPrefix !== undefined && path[0] === options.headerPrefix,
        );
      case 'integer': {
        const min = schema.exclusiveMinimum !== undefined ? schema.exclusiveMinimum + 1 : schema.minimum;
        const max = schema.exclusiveMaximum !== undefined ? schema.exclusiveMaximum - 1 : schema.maximum;
        return fc.integer({ min: min ?? -1_000_000, max: max ?? 1_000_000 });
      }
      case 'number': {
        const min = schema.minimum ?? -1_000_000;
        const max = schema.maximum ?? 1_000_000;
        return fc.oneof(
          fc.integer({ min: Math.ceil(min), max: Math.floor(max) }),
          fc.double({ min, max, noNaN: true, noDefaultInfinity: true }),
        );
      }
      case 'boolean':
        return fc.boolean();
      case 'null':
        return fc.constant(null);
      case 'array': {
        const minLength = schema.minItems ?? (options.full ? 1 : 0);
        const maxLength = Math.max(
          minLength,
          Math.min(schema.maxItems ?? MAX_GENERATED_ITEMS, MAX_GENERATED_ITEMS),
        );
        const items = schema.items
          ? this.#arbitrary(schema.items, [...path, 0], undefined, options)
          : fc.jsonValue();
        return fc.array(items, { minLength: Math.min(minLength, maxLength), maxLength });
      }
      case 'object':
        return this.#object(schema, path, options);
      default:
        throw new Error(`unknown type ${type} at ${path.join('.')}`);
    }
  }

  #string(schema: JsonSchema, name: string | undefined, inHeader: boolean): fc.Arbitrary<string> {
    const minLength = schema.minLength ?? 0;
    const maxLength = schema.maxLength ?? Number.POSITIVE_INFINITY;
    const fits = (value: string) => [...value].length >= minLength && [...value].length <= maxLength;
    const format = schema.format as string | undefined;
    if (name === 'url' || format === 'uri' || format === 'url' || format === 'uri-reference') {
      return fc.constantFrom(...this.#hints.urls.filter(fits));
    }
    let arbitrary: fc.Arbitrary<string>;
    if (format === 'uuid') arbitrary = fc.uuid();
    else if (format === 'date-time' || format === 'date') {
      arbitrary = fc
        .date({
          min: new Date('1970-01-01T00:00:00Z'),
          max: new Date('2099-12-31T00:00:00Z'),
          noInvalidDate: true,
        })
        .map((date) => (format === 'date' ? date.toISOString().slice(0, 10) : date.toISOString()));
    } else if (format === 'email') arbitrary = fc.emailAddress();
    else if (typeof schema.pattern === 'string')
      arbitrary = fc.stringMatching(new RegExp(schema.pattern, 'u'));
    else if (inHeader) {
      // What an HTTP field value can carry (RFC 9110): visible ASCII, obs-text (0x80–0xFF),
      // inner spaces, no edge whitespace.
      const unit = fc
        .oneof(
          { weight: 9, arbitrary: fc.integer({ min: 0x20, max: 0x7e }) },
          { weight: 1, arbitrary: fc.integer({ min: 0xa0, max: 0xff }) },
        )
        .map((code) => String.fromCharCode(code));
      const text = (max: number) =>
        fc.string({ unit, minLength, maxLength: max }).map((value) => value.trim());
      arbitrary =
        schema.maxLength === undefined
          ? fc.oneof(
              { weight: 4, arbitrary: text(MAX_GENERATED_STRING) },
              { weight: 1, arbitrary: text(2000) },
            )
          : text(Math.min(maxLength, MAX_GENERATED_STRING));
    } else {
      const length = {
        minLength,
        maxLength: Math.max(minLength, Math.min(maxLength, MAX_GENERATED_STRING)),
      };
      arbitrary = fc.oneof(
        { weight: 4, arbitrary: fc.string({ unit: 'grapheme-ascii', ...length }) },
        { weight: 1, arbitrary: fc.string({ unit: 'binary', ...length }) },
      );
      // Where the document states no length, a long text now and then finds an unstated limit.
      if (schema.maxLength === undefined) {
        arbitrary = fc.oneof(
          { weight: 9, arbitrary },
          { weight: 1, arbitrary: fc.string({ unit: 'grapheme-ascii', minLength: 256, maxLength: 2000 }) },
        );
      }
    }
    return bounded(arbitrary, fits, (value) => `the length bounds refuse (${[...value].length} characters)`);
  }

  #object(schema: JsonSchema, path: PathSegment[], options: ArbitraryOptions): fc.Arbitrary<unknown> {
    const properties: Record<string, JsonSchema> = schema.properties ?? {};
    const required: string[] = schema.required ?? [];
    const model: Record<string, fc.Arbitrary<unknown>> = {};
    for (const [key, propertySchema] of Object.entries(properties)) {
      if (this.#admitsNothing(propertySchema)) continue;
      model[key] = this.#arbitrary(propertySchema, [...path, key], key, options);
    }
    const declared = fc.record(model, options.full ? {} : { requiredKeys: required });
    const additional = schema.additionalProperties;
    const maxProperties = schema.maxProperties ?? Number.POSITIVE_INFINITY;
    if (additional === false || maxProperties <= Object.keys(properties).length) return declared;
    // The base for mutations stays readable: undeclared keys only where nothing is declared.
    if (options.full && Object.keys(properties).length > 0) return declared;
    const additionalSchema: JsonSchema | undefined =
      typeof additional === 'object' && Object.keys(additional).length > 0 ? additional : undefined;
    // A key a `patternProperties` pattern matches takes that pattern's schema, any other key
    // the `additionalProperties` one.
    const patterns = Object.entries((schema.patternProperties ?? {}) as Record<string, JsonSchema>).map(
      ([pattern, patternSchema]) => ({ pattern: new RegExp(pattern, 'u'), schema: patternSchema }),
    );
    const schemaOfKey = (key: string): JsonSchema | undefined =>
      patterns.find(({ pattern }) => pattern.test(key))?.schema ?? additionalSchema;
    const valueArbitraries = new Map<JsonSchema | undefined, fc.Arbitrary<unknown>>();
    const valueFor = (key: string): fc.Arbitrary<unknown> => {
      const keySchema = schemaOfKey(key);
      let arbitrary = valueArbitraries.get(keySchema);
      if (!arbitrary) {
        arbitrary = keySchema
          ? this.#arbitrary(keySchema, [...path, '*'], undefined, options)
          : fc.jsonValue({ maxDepth: 2 });
        valueArbitraries.set(keySchema, arbitrary);
      }
      return arbitrary;
    };
    const taken = new Set(Object.keys(properties));
    const free = (key: string) => !taken.has(key);
    const hinted = Object.entries(this.#hints.freeForm)
      .filter(([key]) => free(key))
      .map(([key, values]) => {
        const keySchema = schemaOfKey(key);
        const fitting = keySchema ? values.filter((v) => this.isValid(keySchema, v)) : values;
        return fitting.length > 0 ? fc.constantFrom(...fitting).map((value) => [key, value] as const) : null;
      })
      .filter((entry) => entry !== null);
    const randomEntry = bounded(
      fc.string({ minLength: 1, maxLength: 12 }),
      free,
      () => `keys at ${path.join('.')} are taken`,
    ).chain((key) => valueFor(key).map((value) => [key, value] as const));
    const entry =
      hinted.length > 0 ? fc.oneof({ weight: 2, arbitrary: fc.oneof(...hinted) }, randomEntry) : randomEntry;
    const room = Math.min(4, maxProperties - Object.keys(properties).length);
    const extras = fc.array(entry, { minLength: 0, maxLength: room });
    return fc.tuple(declared, extras).map(([declaredValue, entries]) => {
      const value: Record<string, unknown> = {};
      for (const [key, entryValue] of entries) {
        Object.defineProperty(value, key, {
          value: entryValue,
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
      return Object.assign(value, declaredValue);
    });
  }

  /**
   * Values that break one stated rule of the schema each, derived from a valid value: a missing
   * required property, a value of the wrong JSON type, a length, bound, item count, enum,
   * pattern or format broken, an undeclared property where the schema closes the object.
   * `wire` lists top-level locations whose values travel as text (path, query, header), where
   * only text that cannot be read as the stated type is a wrong type.
   */
  mutations(rootSchema: JsonSchema, root: unknown, wire: string[] = []): Mutation[] {
    const found: Mutation[] = [];
    const add = (path: PathSegment[], rule: string, value: unknown, reason?: Mutation['reason']) => {
      const mutated = setAt(root, path, value);
      if (!this.isValid(rootSchema, mutated)) found.push({ path, rule, reason, value: mutated });
    };
    const walk = (schemaIn: JsonSchema, value: unknown, path: PathSegment[]) => {
      const schema = this.resolve(schemaIn);
      const isWire = typeof path[0] === 'string' && wire.includes(path[0]) && path.length > 1;
      const branches: JsonSchema[] | undefined = schema.anyOf ?? schema.oneOf;
      if (branches) {
        const allowed = this.#allowedTypes(schema);
        this.#wrongTypes(allowed, value, isWire).forEach((wrong) => {
          add(path, `type ${[...allowed].join(' | ')}`, wrong, 'invalid_type');
        });
        const branch = branches.find((b) => this.isValid(b, value));
        const { anyOf: _anyOf, oneOf: _oneOf, description: _description, ...around } = schema;
        if (branch && Object.keys(around).length > 0)
          walkInner(this.merge(around, branch), value, path, isWire, true);
        else if (branch) walkInner(this.resolve(branch), value, path, isWire, false);
        return;
      }
      walkInner(schema, value, path, isWire, true);
    };
    const walkInner = (
      schema: JsonSchema,
      value: unknown,
      path: PathSegment[],
      isWire: boolean,
      typeRule: boolean,
    ) => {
      if (typeRule && schema.type) {
        const allowed = this.#allowedTypes(schema);
        for (const wrong of this.#wrongTypes(allowed, value, isWire)) {
          add(path, `type ${[...allowed].join(' | ')}`, wrong, 'invalid_type');
        }
      }
      if (Array.isArray(schema.enum) && schema.enum.every((v: unknown) => typeof v === 'string')) {
        add(path, `enum ${schema.enum.join(', ')}`, 'not_one_of_the_listed_values');
      }
      if (schema.const !== undefined) add(path, `const ${JSON.stringify(schema.const)}`, 'not_the_constant');
      if (typeof value === 'string') {
        const text = value.length > 0 ? value : 'a';
        if (schema.maxLength !== undefined) {
          add(path, `maxLength ${schema.maxLength}`, text.padEnd(schema.maxLength + 1, text.at(-1)));
        }
        if (schema.minLength)
          add(path, `minLength ${schema.minLength}`, [...value].slice(0, schema.minLength - 1).join(''));
        if (typeof schema.pattern === 'string') {
          const pattern = new RegExp(schema.pattern, 'u');
          const broken = ['-', '!', 'A', ' x', 'ä'].find((candidate) => !pattern.test(candidate));
          if (broken !== undefined) add(path, `pattern ${schema.pattern}`, broken);
        }
        const badFormat: Record<string, string> = {
          uuid: 'not-a-uuid',
          'date-time': 'next tuesday',
          date: '2020-13-45',
          email: 'no-at-sign',
          uri: 'not a url',
        };
        if (schema.format && badFormat[schema.format])
          add(path, `format ${schema.format}`, badFormat[schema.format]);
      }
      if (typeof value === 'number') {
        if (schema.maximum !== undefined) add(path, `maximum ${schema.maximum}`, schema.maximum + 1);
        if (schema.minimum !== undefined) add(path, `minimum ${schema.minimum}`, schema.minimum - 1);
        if (schema.type === 'integer') add(path, 'type integer', 1.5, 'invalid_type');
      }
      if (Array.isArray(value)) {
        if (schema.maxItems !== undefined && value.length > 0) {
          const padded = [...value];
          while (padded.length <= schema.maxItems) padded.push(structuredClone(value[0]));
          add(path, `maxItems ${schema.maxItems}`, padded);
        }
        if (schema.minItems) add(path, `minItems ${schema.minItems}`, value.slice(0, schema.minItems - 1));
        if (schema.items && value.length > 0) walk(schema.items, value[0], [...path, 0]);
      }
      if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
        const properties: Record<string, JsonSchema> = schema.properties ?? {};
        for (const key of schema.required ?? []) {
          if (Object.hasOwn(value, key)) add([...path, key], `required ${key}`, REMOVE, 'required');
        }
        if (schema.additionalProperties === false) {
          add([...path, 'undeclared_property'], 'additionalProperties false', 'x');
        } else if (schema.maxProperties !== undefined) {
          const padded: Record<string, unknown> = { ...(value as object) };
          for (let i = 0; Object.keys(padded).length <= schema.maxProperties; i++) padded[`extra_${i}`] = 'x';
          add(path, `maxProperties ${schema.maxProperties}`, padded);
        }
        for (const [key, propertySchema] of Object.entries(properties)) {
          if (Object.hasOwn(value, key)) walk(propertySchema, (value as any)[key], [...path, key]);
        }
      }
    };
    walk(rootSchema, root, []);
    return found;
  }

  #admitsNothing(schema: JsonSchema): boolean {
    const resolved = this.resolve(schema);
    return resolved.not !== undefined && Object.keys(this.resolve(resolved.not)).length === 0;
  }

  #allowedTypes(schema: JsonSchema): Set<string> {
    const allowed = new Set<string>();
    const branches: JsonSchema[] | undefined = schema.anyOf ?? schema.oneOf;
    if (branches) {
      for (const branch of branches)
        for (const type of this.#allowedTypes(this.resolve(branch))) allowed.add(type);
      return allowed;
    }
    if (schema.type === undefined && schema.enum === undefined && schema.const === undefined) {
      for (const type of JSON_TYPE_NAMES) allowed.add(type);
      return allowed;
    }
    const types: string[] = Array.isArray(schema.type) ? schema.type : schema.type ? [schema.type] : [];
    for (const value of [...(schema.enum ?? []), ...(schema.const !== undefined ? [schema.const] : [])]) {
      types.push(jsonTypeOf(value));
    }
    for (const type of types) {
      allowed.add(type);
      if (type === 'number') allowed.add('integer');
    }
    return allowed;
  }

  /** Values of another JSON type, chosen among those a lenient parser would turn into the right one. */
  #wrongTypes(allowed: Set<string>, value: unknown, isWire: boolean): unknown[] {
    if (isWire) {
      if (allowed.has('string')) return [];
      if (allowed.has('integer') || allowed.has('number')) return ['twelve'];
      if (allowed.has('boolean')) return ['maybe'];
      return [];
    }
    const candidates: unknown[] = [];
    if (allowed.has('string')) candidates.push(42, null);
    if (allowed.has('integer') || allowed.has('number'))
      candidates.push(String(typeof value === 'number' ? value : 7));
    if (allowed.has('boolean')) candidates.push('true');
    if (allowed.has('array')) candidates.push(Array.isArray(value) && value.length > 0 ? value[0] : 'x');
    if (allowed.has('object')) candidates.push([]);
    return candidates.filter(
      (candidate) =>
        !allowed.has(jsonTypeOf(candidate)) &&
        !(jsonTypeOf(candidate) === 'integer' && allowed.has('number')),
    );
  }
}
