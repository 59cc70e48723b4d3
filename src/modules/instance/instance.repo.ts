import type { Executor } from '../../db/types.ts';

/** Instance-wide settings (generated secrets, first-start marker); they belong to no account. */
export function createInstanceRepo(db: Executor) {
  return {
    async get(key: string, tx: Executor = db): Promise<string | undefined> {
      const row = await tx
        .selectFrom('instance_settings')
        .select('value')
        .where('key', '=', key)
        .executeTakeFirst();
      return row?.value;
    },

    /** Stores the value unless the key is set already; returns whichever value is stored. */
    async setOnce(key: string, value: string, tx: Executor = db): Promise<string> {
      await tx
        .insertInto('instance_settings')
        .values({ key, value })
        .onConflict((oc) => oc.columns(['account_id', 'key']).doNothing())
        .execute();
      return (await this.get(key, tx)) ?? value;
    },

    async set(key: string, value: string, tx: Executor = db): Promise<void> {
      await tx
        .insertInto('instance_settings')
        .values({ key, value })
        .onConflict((oc) => oc.columns(['account_id', 'key']).doUpdateSet({ value }))
        .execute();
    },
  };
}

export type InstanceRepo = ReturnType<typeof createInstanceRepo>;
