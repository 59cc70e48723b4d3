import type { Db, Executor } from '../../db/types.ts';
import { AppError } from '../../http/errors.ts';
import { iso } from '../../http/schemas.ts';
import { truncate } from '../../lib/text.ts';
import type { OutboundService } from '../../outbound/outbound.service.ts';
import type { EntitiesService } from '../entities/entities.service.ts';
import { checkIdempotencyKey } from '../idempotency/idempotency.service.ts';
import type { RecordsReadRepo, RecordsRepo } from '../records/records.repo.ts';

export const NOTE_KINDS = ['general', 'call', 'email'] as const;
/** More matches than this are not listed in a 409 answer. */
const MAX_LISTED_MATCHES = 20;

export interface NoteInput {
  body: string;
  record?: string;
  email?: string;
  entity?: string;
  kind?: (typeof NOTE_KINDS)[number];
  idempotencyKey?: string;
  tag?: string | null;
}

export interface NoteSender {
  accountId: string;
  /** The API key's name, shown beside the sender `api` in the record's history. */
  keyName: string | null;
  requestId: string;
  /** The history's actor when not the API (`automation:<name>` for an automation's note). */
  actor?: string;
}

function presentNote(note: { id: string; record_id: string; kind: string; created_at: Date }) {
  return {
    id: note.id,
    record_id: note.record_id,
    kind: note.kind,
    created_at: iso(note.created_at),
    warnings: [],
  };
}

export function createNotesService({
  db,
  entities,
  records,
  reads,
  outbound,
}: {
  db: Db;
  entities: EntitiesService;
  records: RecordsRepo;
  reads: RecordsReadRepo;
  /** Account webhooks: `note.added` is written with the note. */
  outbound: Pick<OutboundService, 'subscribers' | 'emitEvent'>;
}) {
  /** The one record a note is for: by id, or by email (case-insensitive) on the email-role field. */
  async function findRecord(accountId: string, input: NoteInput): Promise<string> {
    if (input.record) {
      const record = await reads.findFull(accountId, input.record);
      if (!record) throw new AppError('record_not_found', { message: 'No record matches' });
      return record.id;
    }
    if (!input.email) {
      throw new AppError('validation_failed', {
        details: [{ key: 'record', reason: 'required', message: 'give either record or email' }],
      });
    }
    let entityId: string | undefined;
    if (input.entity) {
      const entity = await entities.find(accountId, input.entity);
      if (!entity) throw new AppError('unknown_entity', { message: `No entity ${input.entity}` });
      entityId = entity.id;
    }
    const matches = await reads.findByEmail(
      accountId,
      input.email.trim().toLowerCase(),
      entityId,
      MAX_LISTED_MATCHES,
    );
    if (matches.length === 0) throw new AppError('record_not_found', { message: 'No record matches' });
    if (matches.length > 1) {
      throw new AppError('ambiguous_match', {
        message: 'Several records match',
        extra: { ids: matches.map((m) => m.id) },
      });
    }
    return matches[0]!.id;
  }

  return {
    /** Adds a note to an existing record; never creates one. The same idempotency key never adds a second note. */
    async add(
      sender: NoteSender,
      input: NoteInput,
    ): Promise<{ note: ReturnType<typeof presentNote>; replayed: boolean }> {
      // The empty key means no key (decisions §4); stored, a second one would meet the unique index.
      if (input.idempotencyKey === '') input = { ...input, idempotencyKey: undefined };
      if (input.idempotencyKey) {
        checkIdempotencyKey(input.idempotencyKey);
        const existing = await reads.findNoteByIdempotencyKey(sender.accountId, input.idempotencyKey);
        if (existing) return { note: presentNote(existing), replayed: true };
      }
      const recordId = await findRecord(sender.accountId, input);
      const kind = input.kind ?? 'general';
      try {
        const insert = (tx?: Executor) =>
          records.insertNoteWithEvent(
            sender.accountId,
            {
              recordId,
              kind,
              body: input.body,
              tag: input.tag ?? null,
              senderName: sender.keyName,
              idempotencyKey: input.idempotencyKey ?? null,
            },
            {
              message: truncate(input.body, 500),
              actor: sender.actor,
              data: {
                sender: sender.actor ? 'automation' : 'api',
                sender_name: sender.keyName,
                kind,
                request_id: sender.requestId,
              },
            },
            tx,
          );
        // Without a subscriber the note stays one statement; with one, its message joins it in a transaction.
        const note =
          (await outbound.subscribers(sender.accountId, 'note.added')).length === 0
            ? await insert()
            : await db.transaction().execute(async (tx) => {
                const added = await insert(tx);
                await outbound.emitEvent(tx, sender.accountId, 'note.added', {
                  record_id: recordId,
                  note: {
                    id: added.id,
                    kind,
                    body: input.body,
                    tag: input.tag ?? null,
                    sender_name: sender.keyName,
                    created_at: iso(added.created_at),
                  },
                });
                return added;
              });
        return { note: presentNote(note), replayed: false };
      } catch (error) {
        // Two requests with one key at once: the unique index let one in; answer with its note.
        if (input.idempotencyKey && (error as { code?: string }).code === '23505') {
          const existing = await reads.findNoteByIdempotencyKey(sender.accountId, input.idempotencyKey);
          if (existing) return { note: presentNote(existing), replayed: true };
        }
        throw error;
      }
    },
  };
}

export type NotesService = ReturnType<typeof createNotesService>;
