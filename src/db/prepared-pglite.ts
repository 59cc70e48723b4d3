import { type PGlite, parse, protocol, type QueryOptions } from '@electric-sql/pglite';
import { SentOnceText } from './json.ts';
import { preparedNameOf } from './prepared.ts';

// PGlite's module is loaded only by a process that opens the embedded database (db/client.ts),
// so that one on PostgreSQL does not hold it.

/**
 * PGlite runs every `query` as parse, describe, bind, describe, execute and sync, and plans the
 * statement each time; in its single thread that planning is most of an intake's cost (the
 * intake statement took 0.95 ms unnamed and 0.20 ms prepared, in memory on one machine). A
 * marked text outside a transaction goes by name instead, under the same two locks `query`
 * takes, with the same value serializers and result parsers. Inside a transaction (Kysely calls
 * the transaction's own `query`) every text runs unnamed, as before.
 */
export function executeMarkedStatementsByNameOnPGlite(pglite: PGlite): void {
  const query = pglite.query.bind(pglite);
  /** Names prepared in this instance, with their parameter types. */
  const prepared = new Map<string, number[]>();
  const { serialize } = protocol;

  async function run(name: string, text: string, params: unknown[], options: QueryOptions | undefined) {
    let types = prepared.get(name);
    if (types === undefined) {
      const described = await pglite.execProtocol(
        Buffer.concat([
          serialize.parse({ name, text }),
          serialize.describe({ type: 'S', name }),
          serialize.sync(),
        ]),
        { syncToFs: false },
      );
      types = parse.parseDescribeStatementResults(described.messages);
      prepared.set(name, types);
    }
    const parameterTypes = types;
    const values = params.map((value, index) => {
      if (value === null || value === undefined) return null;
      const serializer =
        options?.serializers?.[parameterTypes[index]!] ?? pglite.serializers[parameterTypes[index]!];
      return serializer ? serializer(value) : String(value);
    });
    const { messages } = await pglite.execProtocol(
      Buffer.concat([
        serialize.bind({ statement: name, values }),
        serialize.describe({ type: 'P' }),
        serialize.execute({}),
        serialize.sync(),
      ]),
      { syncToFs: false },
    );
    await pglite.syncToFs();
    return parse.parseResults(messages, pglite.parsers, options)[0]!;
  }

  pglite.query = (async (text: string, given?: unknown[], options?: QueryOptions) => {
    // A sent-once text (db/json.ts) is node-postgres's kind of value: PGlite is given the text.
    const params = given?.some((value) => value instanceof SentOnceText)
      ? given.map((value) => (value instanceof SentOnceText ? value.take() : value))
      : given;
    const name = typeof text === 'string' ? preparedNameOf(text) : undefined;
    if (!name || options?.blob) return query(text, params, options);
    await pglite._checkReady();
    return pglite._runExclusiveTransaction(() =>
      pglite._runExclusiveQuery(() => run(name, text, params ?? [], options)),
    );
  }) as PGlite['query'];
}
