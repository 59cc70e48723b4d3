import type { Insertable, Selectable, Updateable } from 'kysely';
import { pastCursor } from '../../db/keyset.ts';
import type { Executor, PartnersTable } from '../../db/types.ts';
import type { CursorPosition } from '../../lib/cursor.ts';

export type PartnerRow = Selectable<PartnersTable>;
/** The columns a request may set (everything but the keys and timestamps). */
export type PartnerColumns = Omit<
  Updateable<PartnersTable>,
  'account_id' | 'id' | 'created_at' | 'updated_at'
>;

/** `%`, `_` and the escape character itself match literally in a LIKE pattern. */
function likePattern(term: string): string {
  return `%${term.replace(/[\\%_]/g, (char) => `\\${char}`)}%`;
}

export function createPartnersRepo(db: Executor) {
  return {
    find(accountId: string, id: string, tx: Executor = db): Promise<PartnerRow | undefined> {
      return tx
        .selectFrom('partners')
        .selectAll()
        .where('account_id', '=', accountId)
        .where('id', '=', id)
        .executeTakeFirst();
    },

    /** Partners that are not retired, oldest first, optionally only those a search term matches. */
    list(
      accountId: string,
      options: { q?: string; limit: number; after: CursorPosition | null },
      tx: Executor = db,
    ): Promise<PartnerRow[]> {
      let query = tx
        .selectFrom('partners')
        .selectAll()
        .where('account_id', '=', accountId)
        .where('retired', '=', false);
      const term = options.q?.trim();
      if (term) {
        const pattern = likePattern(term);
        query = query.where((eb) =>
          eb.or([
            eb('name', 'ilike', pattern),
            eb('contact_person', 'ilike', pattern),
            eb('email', 'ilike', pattern),
            eb('city', 'ilike', pattern),
          ]),
        );
      }
      const after = options.after;
      if (after) {
        query = query.where(pastCursor('created_at', 'id', 'after', after.createdAt, after.id));
      }
      return query.orderBy('created_at').orderBy('id').limit(options.limit).execute();
    },

    /** Throws the database's unique violation (23505) when the name is taken. */
    async insert(
      accountId: string,
      id: string,
      columns: PartnerColumns & { name: string },
      tx: Executor = db,
    ) {
      await tx
        .insertInto('partners')
        .values({ ...columns, account_id: accountId, id } as Insertable<PartnersTable>)
        .execute();
    },

    /** Answers whether the partner exists; throws 23505 when the new name is taken. */
    async update(accountId: string, id: string, columns: PartnerColumns, tx: Executor = db) {
      const row = await tx
        .updateTable('partners')
        .set({ ...columns, updated_at: new Date() })
        .where('account_id', '=', accountId)
        .where('id', '=', id)
        .returning('id')
        .executeTakeFirst();
      return row !== undefined;
    },
  };
}

export type PartnersRepo = ReturnType<typeof createPartnersRepo>;
