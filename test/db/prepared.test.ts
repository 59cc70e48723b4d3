import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PREPARED } from '../../src/db/prepared.ts';
import { createTestDatabase, TEST_DATABASES, type TestDatabase } from '../helpers/databases.ts';

describe.each(TEST_DATABASES)('prepared statements on %s', (kind) => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDatabase(kind);
  });
  afterAll(() => database?.drop());

  it('runs a marked statement with its parameters and answers as an unmarked one', async () => {
    const { db } = database.handle;
    for (const value of [1, 2, 3]) {
      const marked = await sql<{ doubled: number }>`SELECT ${value}::int * 2 AS doubled ${PREPARED}`.execute(
        db,
      );
      const plain = await sql<{ doubled: number }>`SELECT ${value}::int * 2 AS doubled`.execute(db);
      expect(marked.rows).toEqual(plain.rows);
      expect(marked.rows).toEqual([{ doubled: value * 2 }]);
    }
  });

  it('prepares a marked text once per connection and leaves unmarked texts unnamed', async () => {
    const { db } = database.handle;
    await db.connection().execute(async (connection) => {
      for (let i = 0; i < 3; i++) await sql`SELECT ${i}::int AS n ${PREPARED}`.execute(connection);
      await sql`SELECT 42 AS unmarked`.execute(connection);
      const prepared = await sql<{ name: string; statement: string }>`
          SELECT name, statement FROM pg_prepared_statements`.execute(connection);
      const mine = prepared.rows.filter((row) => row.statement.includes('AS n /* prepared */'));
      expect(mine).toHaveLength(1);
      expect(mine[0]!.name).toMatch(/^leads_\d+$/);
      expect(prepared.rows.some((row) => row.statement.includes('unmarked'))).toBe(false);
    });
  });

  it('keeps marked statements inside transactions correct (they run unnamed there on PGlite)', async () => {
    const { db } = database.handle;
    const rows = await db.transaction().execute(async (tx) => {
      const inside = await sql<{ n: number }>`SELECT ${7}::int AS n ${PREPARED}`.execute(tx);
      return inside.rows;
    });
    expect(rows).toEqual([{ n: 7 }]);
  });

  it('reports a failing marked statement as the database error, and stays usable', async () => {
    const { db } = database.handle;
    await expect(sql`SELECT 1 / ${0}::int AS n ${PREPARED}`.execute(db)).rejects.toMatchObject({
      code: '22012',
    });
    const after = await sql<{ n: number }>`SELECT 1 / ${1}::int AS n ${PREPARED}`.execute(db);
    expect(after.rows).toEqual([{ n: 1 }]);
  });
});
