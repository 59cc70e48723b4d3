import { createConfig, lintFromString, type NormalizedProblem } from '@redocly/openapi-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';

/**
 * Redocly's recommended rules over the document the service serves. Errors fail; the warnings
 * that remain are the ones docs/decisions.md ("OpenAPI document") lists with their reasons.
 */
const KEPT_WARNINGS = new Set<string>([]);

function describeProblem(problem: NormalizedProblem): string {
  return `${problem.severity} ${problem.ruleId} ${problem.location[0]?.pointer ?? ''}: ${problem.message}`;
}

describe('the served OpenAPI document', () => {
  let t: TestApp;
  let problems: NormalizedProblem[];
  let document: {
    tags: { name: string }[];
    paths: Record<string, Record<string, { tags?: string[] }>>;
  };
  beforeAll(async () => {
    t = await startTestApp('pglite');
    const served = await t.app.inject({ method: 'GET', url: '/api/v1/openapi.json' });
    expect(served.statusCode).toBe(200);
    document = served.json();
    const config = await createConfig({ extends: ['recommended'] });
    problems = await lintFromString({ source: served.body, absoluteRef: '/openapi.json', config });
  });
  afterAll(async () => t?.close());

  it('has no error under Redocly’s recommended rules', () => {
    expect(problems.filter((p) => p.severity === 'error').map(describeProblem)).toEqual([]);
  });

  it('has no warning beyond the ones kept on purpose', () => {
    const warnings = problems.filter((p) => p.severity === 'warn' && !KEPT_WARNINGS.has(p.ruleId));
    expect(warnings.map(describeProblem)).toEqual([]);
  });

  it('declares every tag an operation uses, so that Swagger UI groups and describes it', () => {
    const declared = new Set(document.tags.map((tag) => tag.name));
    const undeclared = Object.entries(document.paths).flatMap(([path, operations]) =>
      Object.entries(operations).flatMap(([method, operation]) =>
        (operation.tags ?? []).filter((tag) => !declared.has(tag)).map((tag) => `${method} ${path}: ${tag}`),
      ),
    );
    expect(undeclared).toEqual([]);
  });

  it('fails on a document with an error', async () => {
    const config = await createConfig({ extends: ['recommended'] });
    const broken = await lintFromString({
      source: JSON.stringify({ openapi: '3.1.0', info: { title: 'x', version: '1' }, paths: {} }),
      absoluteRef: '/broken.json',
      config,
    });
    expect(broken.some((p) => p.severity === 'error')).toBe(true);
  });
});
