import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SentOnceText, toJsonSentOnce } from '../../src/db/json.ts';
import { PREPARED } from '../../src/db/prepared.ts';
import { createTestDatabase, TEST_DATABASES, type TestDatabase } from '../helpers/databases.ts';

describe.each(TEST_DATABASES)('a sent-once text parameter on %s', (kind) => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDatabase(kind);
  });
  afterAll(() => database?.drop());

  const items = [
    { ord: 0, name: 'Ada', note: 'ä \u{1F600} "quoted"' },
    { ord: 1, name: 'Bo', note: null },
  ];

  it('is read as the text it holds, in a marked statement and an unmarked one', async () => {
    const { db } = database.handle;
    for (const mark of [PREPARED, sql``]) {
      const given = toJsonSentOnce(items);
      const result = await sql<{ ord: number; name: string; note: string | null }>`
        SELECT ord, name, note FROM jsonb_to_recordset(${given}::jsonb) AS r(ord int, name text, note text)
        ORDER BY ord ${mark}`.execute(db);
      expect(result.rows).toEqual(items);
      // The driver took the text as it sent it: nothing holds it any more.
      expect(() => given.take()).toThrow('sent twice');
    }
  });

  it('gives a copy made before it is sent, which a second statement sends in turn', async () => {
    const { db } = database.handle;
    const given = toJsonSentOnce(items);
    const again = given.copy();
    const read = (text: SentOnceText) =>
      sql<{
        count: number;
      }>`SELECT count(*)::int AS count FROM jsonb_array_elements(${text}::jsonb) ${PREPARED}`.execute(db);
    expect((await read(given)).rows).toEqual([{ count: 2 }]);
    expect(() => given.copy()).toThrow('copied after it was sent');
    expect((await read(again)).rows).toEqual([{ count: 2 }]);
    expect(() => again.take()).toThrow('sent twice');
  });

  it('has no JSON or string form, so that a path that would serialize it itself refuses it', () => {
    const given = new SentOnceText('{"a":1}');
    expect(() => JSON.stringify({ given })).toThrow('no JSON form');
    expect(() => String(given)).toThrow('no string form');
    expect(given.take()).toBe('{"a":1}');
  });
});
