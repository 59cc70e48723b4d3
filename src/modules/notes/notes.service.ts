import { isUniqueViolation } from '../../db/errors.ts';
import type { Db, Executor } from '../../db/types.ts';
import { AppError } from '../../http/errors.ts';
import { iso } from '../../http/schemas.ts';
import { createBatcher } from '../../lib/batcher.ts';
import { timeOrderedId } from '../../lib/ids.ts';
import { matchingForm, truncate } from '../../lib/text.ts';
import type { OutboundService } from '../../outbound/outbound.service.ts';
import type { AuthService } from '../auth/auth.service.ts';
import type { EntitiesService } from '../entities/entities.service.ts';
import { checkIdempotencyKey, requestHash } from '../idempotency/idempotency.service.ts';
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

/** The hash of a keyed note's request as given: its target, kind, text and tag, not the key. */
function noteRequestHash({ idempotencyKey: _, ...asked }: NoteInput): string {
  return requestHash({ ...asked, kind: asked.kind ?? 'general' });
}

export interface NoteSender {
  accountId: string;
  /** The API key's name, shown beside the sender `api` in the record's history. */
  keyName: string | null;
  requestId: string;
  /** The history's actor (`api:<key name>`, `automation:<name>`, `user:<email>`); `api` when not given. */
  actor?: string;
  /**
   * The API key the note comes with. `checked` false: it was taken from memory and must be
   * checked before anything is written or answered (the grouped statement checks it itself).
   */
  key?: { keyId: string; checked: boolean } | null;
}

/** At most this many notes share one statement. */
const MAX_GROUPED_NOTES = 10;

type MatchedNote = Parameters<RecordsRepo['addNotesByMatch']>[1][number];

function recordOrEmailRequired() {
  return new AppError('validation_failed', {
    details: [{ key: 'record', reason: 'required', message: 'give either record or email' }],
  });
}

/**
 * The two locators name the record each on their own: given together they could name two
 * records, and taking one would drop the other without a word (the interface: give either).
 */
function recordAndEmailRefused() {
  return new AppError('validation_failed', {
    details: [{ key: 'email', reason: 'not_allowed', message: 'give either record or email, not both' }],
  });
}

/** No record matches (within the entity the note names, when it names one). */
function noRecordMatches(entity?: string) {
  return new AppError('record_not_found', {
    message: entity ? `No record of entity ${entity} matches` : 'No record matches',
  });
}

/** No match is 404, several are 409 with their ids (at most 20). */
function checkMatches(ids: string[], entity?: string) {
  if (ids.length === 0) throw noRecordMatches(entity);
  if (ids.length > 1) {
    throw new AppError('ambiguous_match', { message: 'Several records match', extra: { ids } });
  }
}

/** The sender type a note's history entry names: a person, an automation, else the API. */
function senderTypeOf(actor: string | undefined): 'user' | 'automation' | 'api' {
  if (actor?.startsWith('user:')) return 'user';
  if (actor?.startsWith('automation:')) return 'automation';
  return 'api';
}

/** The `note_added` history entry of a note. */
function noteEvent(sender: NoteSender, input: NoteInput, kind: string) {
  return {
    message: truncate(input.body, 500),
    actor: sender.actor ?? 'api',
    data: {
      sender: senderTypeOf(sender.actor),
      sender_name: sender.keyName,
      kind,
      request_id: sender.requestId,
    },
  };
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
  auth,
  concurrentNotes = 3,
}: {
  db: Db;
  entities: EntitiesService;
  records: RecordsRepo;
  reads: RecordsReadRepo;
  /** Account webhooks: `note.added` is written with the note. */
  outbound: Pick<OutboundService, 'subscribers' | 'emitEvent'>;
  /** Checks API keys taken from memory, and forgets revoked ones. */
  auth: Pick<AuthService, 'checkApiKey' | 'forgetApiKey'>;
  /**
   * Grouped note statements run at once (group commit, as intake's creations): the notes of one
   * account that arrive in one turn of the event loop, or while all of these run, share the next
   * statement. Default 3 (the service passes a third of its pool).
   */
  concurrentNotes?: number;
}) {
  const groupedNotes = createBatcher({
    maxBatch: MAX_GROUPED_NOTES,
    maxInFlight: concurrentNotes,
    run: (accountId: string, items: MatchedNote[]) => records.addNotesByMatch(accountId, items),
  });

  /** Refuses a remembered API key that was revoked since; a live one counts as checked. */
  async function checkKey(sender: NoteSender) {
    const key = sender.key;
    if (!key || key.checked) return;
    if (!(await auth.checkApiKey(sender.accountId, key.keyId))) throw new AppError('unauthorized');
    key.checked = true;
  }

  /**
   * A note without an idempotency key for an account without `note.added` subscribers: found,
   * checked and written in one statement shared with the notes that arrive with it.
   */
  async function addByMatch(sender: NoteSender, input: NoteInput) {
    if (!input.record && !input.email) throw recordOrEmailRequired();
    let entityId: string | null = null;
    // The entity limits the look-up by id as by email: a record of another entity is no match.
    if (input.entity) {
      const entity = await entities.find(sender.accountId, input.entity);
      if (!entity) throw new AppError('unknown_entity', { message: `No entity ${input.entity}` });
      entityId = entity.id;
    }
    const key = sender.key ?? null;
    const kind = input.kind ?? 'general';
    const item: MatchedNote = {
      noteId: timeOrderedId(),
      uncheckedKeyId: key && !key.checked ? key.keyId : null,
      recordId: input.record ?? null,
      emailLc: input.record ? null : matchingForm(input.email!),
      entityId,
      kind,
      body: input.body,
      tag: input.tag ?? null,
      senderName: sender.keyName,
      event: noteEvent(sender, input, kind),
    };
    const result = await groupedNotes
      .submit(sender.accountId, item)
      // A statement that failed as a whole (a record deleted meanwhile fails its foreign key) is
      // run again for this note alone, so that each note gets its own answer.
      .catch(async () => (await records.addNotesByMatch(sender.accountId, [item]))[0]!);
    if (!result.keyLive) {
      auth.forgetApiKey(sender.accountId, key!.keyId);
      throw new AppError('unauthorized');
    }
    if (key) key.checked = true;
    checkMatches(result.matches, input.entity);
    return presentNote({
      id: item.noteId,
      record_id: result.matches[0]!,
      kind,
      created_at: result.createdAt!,
    });
  }

  /** The one record a note is for: by id, or by email (case-insensitive) on the email-role field. */
  async function findRecord(accountId: string, input: NoteInput): Promise<string> {
    if (!input.record && !input.email) throw recordOrEmailRequired();
    let entityId: string | undefined;
    if (input.entity) {
      const entity = await entities.find(accountId, input.entity);
      if (!entity) throw new AppError('unknown_entity', { message: `No entity ${input.entity}` });
      entityId = entity.id;
    }
    if (input.record) {
      const record = await reads.findFull(accountId, input.record);
      // With an entity, a record of another one is no match (as an email of another entity is not).
      if (!record || (entityId !== undefined && record.entity_id !== entityId))
        throw noRecordMatches(input.entity);
      return record.id;
    }
    const matches = await reads.findByEmail(
      accountId,
      matchingForm(input.email!),
      entityId,
      MAX_LISTED_MATCHES,
    );
    checkMatches(
      matches.map((m) => m.id),
      input.entity,
    );
    return matches[0]!.id;
  }

  return {
    /** Adds a note to an existing record; never creates one. The same idempotency key never adds a second note. */
    async add(
      sender: NoteSender,
      input: NoteInput,
    ): Promise<{ note: ReturnType<typeof presentNote>; replayed: boolean }> {
      // Decisions §4: 1–255 characters; the empty key is refused, not taken as no key.
      if (input.idempotencyKey !== undefined) checkIdempotencyKey(input.idempotencyKey);
      if (input.record && input.email) throw recordAndEmailRefused();
      const subscribed = (await outbound.subscribers(sender.accountId, 'note.added')).length > 0;
      if (!input.idempotencyKey && !subscribed)
        return { note: await addByMatch(sender, input), replayed: false };
      // A stored note is not handed to a revoked key.
      await checkKey(sender);
      // What was asked, without the key: the same key with another request is refused.
      const asked = input.idempotencyKey ? noteRequestHash(input) : null;
      const replay = (existing: { request_hash: string | null } & Parameters<typeof presentNote>[0]) => {
        if (existing.request_hash !== null && existing.request_hash !== asked)
          throw new AppError('idempotency_key_reused');
        return { note: presentNote(existing), replayed: true };
      };
      if (input.idempotencyKey) {
        const existing = await reads.findNoteByIdempotencyKey(sender.accountId, input.idempotencyKey);
        if (existing) return replay(existing);
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
              requestHash: asked,
            },
            noteEvent(sender, input, kind),
            tx,
          );
        // Without a subscriber the note stays one statement; with one, its message joins it in a transaction.
        const note = !subscribed
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
        if (input.idempotencyKey && isUniqueViolation(error)) {
          const existing = await reads.findNoteByIdempotencyKey(sender.accountId, input.idempotencyKey);
          if (existing) return replay(existing);
        }
        throw error;
      }
    },
  };
}

export type NotesService = ReturnType<typeof createNotesService>;
