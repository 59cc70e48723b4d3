import {
  CompiledQuery,
  DummyDriver,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  sql,
} from 'kysely';
import type { Database, Db } from '../../src/db/types.ts';
import type { TestApp } from './app.ts';

/** A node of PostgreSQL's JSON plan, with the fields the plan tests read. */
export interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Index Cond'?: string;
  'Scan Direction'?: string;
  Plans?: PlanNode[];
}

/** A plan's nodes, depth first. */
export function nodesOf(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodesOf)];
}

/**
 * The statements `send` makes a repo send, compiled as the service compiles them and never run
 * (Kysely's compiler over a driver that answers nothing).
 */
export async function compiledBy(send: (db: Db) => Promise<unknown>): Promise<CompiledQuery[]> {
  const compiled: CompiledQuery[] = [];
  const compiler = new Kysely<Database>({
    dialect: {
      createAdapter: () => new PostgresAdapter(),
      createDriver: () => new DummyDriver(),
      createIntrospector: (db) => new PostgresIntrospector(db),
      createQueryCompiler: () => new PostgresQueryCompiler(),
    },
    log: (event) => {
      compiled.push(event.query);
    },
  });
  await send(compiler satisfies Db);
  await compiler.destroy();
  return compiled;
}

/** The plan the database gives `query` with its parameters' values known (an unnamed statement). */
export async function planOf(t: TestApp, query: CompiledQuery): Promise<PlanNode[]> {
  const explained = await t.db.executeQuery<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
    CompiledQuery.raw(`EXPLAIN (FORMAT JSON) ${query.sql}`, [...query.parameters]),
  );
  return nodesOf(explained.rows[0]!['QUERY PLAN'][0].Plan);
}

let prepared = 0;

/**
 * A parameter's value as an SQL literal of unknown type (the prepared statement types it). Only
 * the kinds the plan tests pass are written; any other is refused rather than guessed at.
 */
function literalOf(value: unknown): string {
  if (value === null || value === undefined) return 'NULL';
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean')
    return String(value);
  if (typeof value === 'string') return `'${value.replaceAll("'", "''")}'`;
  throw new Error(`no literal for a parameter of type ${Object.prototype.toString.call(value)}`);
}

/**
 * The generic plan of `query` (planned once for any parameters, as a prepared statement's plan
 * is after its fifth run), explained for these parameters.
 */
export async function genericPlanOf(t: TestApp, query: CompiledQuery): Promise<PlanNode[]> {
  // A name of its own each time: a statement prepared in a transaction that then failed stays
  // prepared on that connection.
  const name = `plan_under_test_${++prepared}`;
  return t.db.transaction().execute(async (tx) => {
    await sql`SET LOCAL plan_cache_mode = force_generic_plan`.execute(tx);
    await tx.executeQuery(CompiledQuery.raw(`PREPARE ${name} AS ${query.sql}`));
    // EXECUTE takes no bound parameters: its arguments are written as literals.
    const args = query.parameters.map(literalOf).join(', ');
    const explained = await tx.executeQuery<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
      CompiledQuery.raw(`EXPLAIN (FORMAT JSON) EXECUTE ${name}(${args})`),
    );
    await tx.executeQuery(CompiledQuery.raw(`DEALLOCATE ${name}`));
    return nodesOf(explained.rows[0]!['QUERY PLAN'][0].Plan);
  });
}
