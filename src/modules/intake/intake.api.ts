import { s1Body, s2Body } from '../../http/error-handler.ts';
import { AppError, type ValidationDetail, validationFailed } from '../../http/errors.ts';
import { jsonChecker } from '../../http/validation.ts';
import { mapLimited } from '../../lib/concurrency.ts';
import { isStorableText } from '../../lib/text.ts';
import { MAX_DOCUMENTS_PER_CALL } from '../documents/documents.service.ts';
import {
  checkIdempotencyKey,
  type IdempotencyService,
  isIdempotencyKey,
  type StoreAnswer,
  type StoredAnswer,
} from '../idempotency/idempotency.service.ts';
import { BLANK_NOTE, blankNoteWarning, isNoteText } from '../notes/note-text.ts';
import {
  bodyBesideKey,
  idempotencyKeyOf,
  isJsonObject,
  namedInBody,
  readS1Lead,
  readS2Body,
  type S2RecordBody,
  setAsideModuleNodes,
} from './intake.handover.ts';
import type { BulkLogItem } from './intake.repo.ts';
import { S2RecordBody as S2RecordBodySchema } from './intake.schemas.ts';
import {
  type BatchResult,
  EXISTING_RECORD,
  type Handover,
  type IntakeContext,
  type IntakeOutcome,
  type IntakeService,
  outcomeOf,
  type Warning,
} from './intake.service.ts';

/**
 * A bulk entry is checked like the body of POST /api/v1/records (typed, no coercion); the call's
 * schema leaves that to each entry, so that a bad one is refused on its own (interface: bulk).
 */
const recordBodyCheck = jsonChecker(S2RecordBodySchema);

function checkBulkEntry(entry: Record<string, unknown>): void {
  const refused = recordBodyCheck(entry);
  if (refused) throw refused;
}

/** Idempotency scopes (decisions §4): per account and endpoint; bulk entries share the single-record scope. */
export const RECORD_SCOPE = 'POST /api/v1/records';
const BULK_SCOPE = 'POST /api/v1/records/bulk';
const S1_LEAD_SCOPE = 'POST /api/intake';
const S1_BULK_SCOPE = 'POST /api/leads/bulk';
/** Entries of one bulk call taken in at once. */
const BULK_CONCURRENCY = 8;

export interface Answer {
  status: number;
  body: unknown;
  replayed: boolean;
}

function s2Response(outcome: Omit<IntakeOutcome, 'createdAt'>) {
  return {
    id: outcome.recordId,
    entity: outcome.entityKey,
    created: outcome.created,
    updated: outcome.updated,
    warnings: outcome.warnings,
    ...(outcome.booking ? { booking: outcome.booking } : {}),
    ...(outcome.distribution ? { distribution: outcome.distribution } : {}),
  };
}

/**
 * What S1 adds to a lead's answer: the booking and its warnings when the lead asked for a booking
 * (a booking node, or one the account's modules set aside with a `booking` warning), and the
 * warning of a `status:<pipeline>` key that a stored lead was not moved by (`existing_record`),
 * a note that added nothing for being blank (`blank`) and a note object's key it does not take
 * (`notes.<index>.<key>`, `unmapped`); nothing else (S1 answers carry no other warnings). The same for a single lead and a bulk item.
 */
function s1Extras(handover: Handover, outcome: IntakeOutcome) {
  const asked = handover.booking !== null || handover.warnings.some((warning) => warning.key === 'booking');
  const warnings = outcome.warnings.filter(
    (warning) =>
      (asked && warning.key.startsWith('booking')) ||
      warning.reason === EXISTING_RECORD ||
      warning.reason === BLANK_NOTE ||
      warning.key.startsWith('notes.'),
  );
  return {
    ...(outcome.booking ? { booking: outcome.booking } : {}),
    ...(asked || warnings.length > 0 ? { warnings } : {}),
  };
}

/** A bulk entry's outcome as the call's log entry lists it, read from the entry's answer. */
function logItemOf(index: number, result: { accepted: boolean; body: unknown }): BulkLogItem {
  if (result.accepted) {
    const answer = result.body as ReturnType<typeof s2Response>;
    return {
      index,
      status: outcomeOf(answer),
      record_id: answer.id,
      ...(answer.warnings.length > 0 ? { warnings: answer.warnings } : {}),
    };
  }
  const refusal = result.body as { error: string; details?: unknown[] };
  return {
    index,
    status: 'refused',
    error: refusal.error,
    ...(refusal.details && refusal.details.length > 0 ? { details: refusal.details } : {}),
  };
}

/** The entity every entry names, or null when they name several (or none that can be stored). */
function sharedEntityOf(entries: unknown[]): string | null {
  const names = new Set(entries.map((entry) => (isJsonObject(entry) ? entry.entity : undefined)));
  const [only] = names;
  return names.size === 1 && typeof only === 'string' && only !== '' && isStorableText(only) ? only : null;
}

/** The S2 and S1 intake endpoints over the intake service, with idempotency where it applies. */
export function createIntakeApi({
  intake,
  idempotency,
}: {
  intake: IntakeService;
  idempotency: IdempotencyService;
}) {
  async function recordOnce(
    ctx: IntakeContext,
    body: S2RecordBody,
    headerKey: unknown,
    scope: string,
    bodyWarnings: Warning[] = [],
  ): Promise<Answer> {
    const rawKey = idempotencyKeyOf(body, headerKey);
    const handoverOf = () => {
      const handover = readS2Body(body, ctx.modules);
      handover.warnings.unshift(...bodyWarnings);
      return handover;
    };
    const run = async (store?: StoreAnswer) => {
      const { status, body: answer } = await intake.intakeOne(ctx, handoverOf(), s2Response, store);
      return { status, body: answer };
    };
    // A first request's write checks a remembered key itself; a stored answer is handed only to
    // a key checked live first.
    // Without a key nothing is compared: the body goes on as it is, with no copy made.
    return onceByKey(ctx, scope, rawKey, rawKey === undefined ? body : bodyBesideKey(body), run, {
      beforeReplay: () => intake.checkKey(ctx),
      // A new record goes with the grouped creations, its answer stored by the same statement.
      firstTry: (claim) => intake.intakeOneClaiming(ctx, handoverOf(), s2Response, claim),
    });
  }

  /**
   * Runs `work` at most once per idempotency key (`rawKey` as sent, checked here; decisions §4),
   * or, without a key, once as it is.
   */
  async function onceByKey(
    ctx: IntakeContext,
    scope: string,
    rawKey: unknown,
    body: unknown,
    work: (store?: StoreAnswer) => Promise<StoredAnswer>,
    options?: Parameters<IdempotencyService['run']>[4],
  ): Promise<Answer> {
    // A refusal the service did not log (one found reading the body) is logged before it becomes
    // the key's stored answer, which is returned rather than thrown (decisions §10).
    const logged = (store?: StoreAnswer) =>
      work(store).catch(async (error: unknown) => {
        if (error instanceof AppError) await intake.logCallRefusal(ctx, namedInBody(body), error);
        throw error;
      });
    if (rawKey === undefined) return { ...(await logged()), replayed: false };
    const key = checkIdempotencyKey(rawKey);
    const answer = await idempotency.run(ctx.accountId, { scope, key }, body, logged, options);
    if (answer.replayed) await intake.logReplay(ctx, namedInBody(body), answer);
    return answer;
  }

  return {
    /**
     * The answer to a trapped post (decisions §13), made by `answer`, kept under the post's
     * idempotency key as a real post's answer is: a repeat with that key and body gets the first
     * answer replayed (its id, `Idempotent-Replayed`), so that repeating a post does not tell a
     * bot it was trapped. Nothing else is written here; the caller logs the post as `spam`.
     * Without a key, or with one a real post would be refused for (the trap answers a body that
     * would be refused as a success too), the answer is made afresh.
     */
    async trapped(
      ctx: IntakeContext,
      body: S2RecordBody,
      headerKey: unknown,
      answer: () => StoredAnswer,
    ): Promise<Answer> {
      const rawKey = idempotencyKeyOf(body, headerKey);
      const key = isIdempotencyKey(rawKey) ? rawKey : null;
      if (key === null) return { ...answer(), replayed: false };
      return idempotency.run(
        ctx.accountId,
        { scope: RECORD_SCOPE, key },
        bodyBesideKey(body),
        async () => answer(),
        { beforeReplay: () => intake.checkKey(ctx) },
      );
    },

    /**
     * The warnings a created record's answer to `body` would carry (`bodyWarnings` first, as
     * `record` puts them), for an answer that creates nothing: a filled trap's (decisions §13).
     * A body its schema or the entity would refuse gets `bodyWarnings` alone.
     */
    async warningsFor(ctx: IntakeContext, body: S2RecordBody, bodyWarnings: Warning[]): Promise<Warning[]> {
      setAsideModuleNodes(body, ctx.modules);
      if (recordBodyCheck(body)) return bodyWarnings;
      try {
        const handover = readS2Body(body, ctx.modules);
        return [...bodyWarnings, ...(await intake.warningsOf(ctx, handover))];
      } catch (error) {
        if (!(error instanceof AppError)) throw error;
        return bodyWarnings;
      }
    },

    /**
     * POST /api/v1/records and POST /api/v1/in/{token}. `bodyWarnings` report what the body's
     * encoding carried that was not taken (file parts of a form, decisions §13).
     */
    record(
      ctx: IntakeContext,
      body: S2RecordBody,
      headerKey: unknown,
      bodyWarnings: Warning[] = [],
    ): Promise<Answer> {
      return recordOnce(ctx, body, headerKey, RECORD_SCOPE, bodyWarnings);
    },

    /**
     * POST /api/v1/records/bulk: each entry alone; a failed one never blocks the others.
     * `entryProblems` are the entries the edge check refused (text the database cannot store).
     */
    async bulk(
      ctx: IntakeContext,
      body: { records: unknown[] },
      headerKey: unknown,
      entryProblems: Map<number, ValidationDetail[]> | null = null,
    ): Promise<Answer> {
      // The call is logged as one entry listing every entry's outcome (decisions §10).
      ctx = { ...ctx, loggedByCall: true };
      const work = async () => {
        type EntryResult = { accepted: boolean; body: unknown };
        const results: (EntryResult | undefined)[] = body.records.map(() => undefined);
        const refuse = (error: unknown): EntryResult => {
          if (
            !(error instanceof AppError) ||
            error.status >= 500 ||
            error.status === 401 ||
            error.status === 429
          )
            throw error;
          return { accepted: false, body: s2Body(error) };
        };
        const refuseEarly = (index: number, error: unknown) => {
          results[index] = refuse(error);
        };
        for (const [index, details] of entryProblems ?? []) refuseEarly(index, validationFailed(details));
        // At most 20 documents a call (decisions §4), counted over the entries in their order: an
        // entry whose documents would take the call past them is refused, the others go on.
        // Entries their schema refuses fetch nothing and count nothing.
        let documentsInCall = 0;
        const documentsFit = (entry: Record<string, unknown>): boolean => {
          const count = Array.isArray(entry.documents) ? entry.documents.length : 0;
          if (count === 0 || recordBodyCheck(entry)) return true;
          if (documentsInCall + count > MAX_DOCUMENTS_PER_CALL) return false;
          documentsInCall += count;
          return true;
        };
        // New records without their own idempotency key go in together, in one statement. Their
        // positions in the call are kept apart from the handovers, which nothing holds while the
        // statement runs (fewer objects for each collection to copy meanwhile).
        const togetherAt: number[] = [];
        const handovers: ReturnType<typeof readS2Body>[] = [];
        for (const [index, entry] of body.records.entries()) {
          if (results[index]) continue;
          if (!isJsonObject(entry)) {
            refuseEarly(
              index,
              validationFailed([{ key: 'body', reason: 'invalid_type', message: 'must be object' }]),
            );
            continue;
          }
          // Before the entry's schema check, as for a single record (intake.routes.ts).
          setAsideModuleNodes(entry, ctx.modules);
          if (!documentsFit(entry)) {
            refuseEarly(
              index,
              validationFailed([
                {
                  key: 'documents',
                  reason: 'too_many',
                  message: `at most ${MAX_DOCUMENTS_PER_CALL} documents per call, counted over its entries in order`,
                },
              ]),
            );
            continue;
          }
          if (idempotencyKeyOf(entry as S2RecordBody, undefined) !== undefined) continue;
          try {
            checkBulkEntry(entry);
            handovers.push(readS2Body(entry as S2RecordBody, ctx.modules));
            togetherAt.push(index);
          } catch (error) {
            refuseEarly(index, error);
          }
        }
        const entityKey = sharedEntityOf(body.records);
        const settle = (into: (EntryResult | undefined)[], batched: BatchResult[]) => {
          for (const [position, outcome] of batched.entries()) {
            const index = togetherAt[position]!;
            if (outcome.kind === 'done') into[index] = { accepted: true, body: outcome.body };
            else if (outcome.kind === 'error') into[index] = refuse(outcome.error);
          }
        };
        // When every entry is answered by the batch, its statement writes the call's log entry
        // too (one statement and one commit a call), listing the outcomes it will have given.
        const { results: batched, logged } = await intake.intakeBatch(
          ctx,
          handovers,
          s2Response,
          (expected) => {
            const settled = [...results];
            settle(settled, expected);
            if (settled.some((result) => result === undefined)) return null;
            return intake.bulkEntry(
              ctx,
              entityKey,
              settled.map((result, index) => logItemOf(index, result!)),
            );
          },
        );
        settle(results, batched);
        // The rest (idempotency keys, documents, duplicates, updates) one by one, several at once.
        const rest = body.records
          .map((entry, index) => ({ entry, index }))
          .filter(({ index }) => !results[index]);
        await mapLimited(rest, BULK_CONCURRENCY, async ({ entry, index }) => {
          try {
            // Only objects are left here: the others were refused above.
            checkBulkEntry(entry as Record<string, unknown>);
            const answer = await recordOnce(ctx, entry as S2RecordBody, undefined, RECORD_SCOPE);
            results[index] = { accepted: answer.status < 400, body: answer.body };
          } catch (error) {
            results[index] = refuse(error);
          }
        });
        const accepted = results.filter((result) => result?.accepted).length;
        if (!logged) {
          await intake.logBulkCall(
            ctx,
            entityKey,
            results.map((result, index) => logItemOf(index, result!)),
          );
        }
        return {
          status: 200,
          body: {
            accepted,
            rejected: body.records.length - accepted,
            results: results.map((result) => result?.body),
          },
        };
      };
      // A remembered key is checked by the first statement that writes (the batch's, or each
      // entry's own); a stored answer is handed only to a key checked live first.
      return onceByKey(ctx, BULK_SCOPE, idempotencyKeyOf(undefined, headerKey), body, work, {
        beforeReplay: () => intake.checkKey(ctx),
      });
    },

    /**
     * POST /api/intake (S1). With an `Idempotency-Key` header a repeat answers the same (S1's
     * 200 and body, refusals in S1's error body) and creates nothing (decisions §4).
     */
    async s1Lead(ctx: IntakeContext, body: Record<string, unknown>, headerKey: unknown): Promise<Answer> {
      const run = async (store?: StoreAnswer) => {
        const handover = readS1Lead(body, ctx.modules);
        const answer = (outcome: IntakeOutcome) => ({
          status: 'success' as const,
          lead_id: outcome.recordId,
          created_at: outcome.createdAt,
          ...s1Extras(handover, outcome),
        });
        // S1's answer names the lead's created_at: stored after the write that gives that time.
        const { status, body: answered } = await intake.intakeOne(
          ctx,
          handover,
          answer,
          store && { ...store, namesWriteTime: true },
        );
        return { status, body: answered };
      };
      return onceByKey(ctx, S1_LEAD_SCOPE, idempotencyKeyOf(undefined, headerKey), body, run, {
        beforeReplay: () => intake.checkKey(ctx),
        errorBody: s1Body,
      });
    },

    /**
     * POST /api/leads/bulk (S1): all or nothing. With an `Idempotency-Key` header a repeat
     * answers the same and creates nothing (decisions §4).
     */
    async s1Bulk(
      ctx: IntakeContext,
      body: { entity: string; batch: Record<string, unknown>[]; source?: string; note?: string },
      headerKey: unknown,
      entryProblems: Map<number, ValidationDetail[]> | null = null,
    ): Promise<Answer> {
      const work = async (store?: StoreAnswer) => {
        if (entryProblems && entryProblems.size > 0) {
          const error = validationFailed(
            [...entryProblems].flatMap(([index, details]) =>
              details.map((detail) => ({ ...detail, key: `batch.${index}.${detail.key}` })),
            ),
          );
          await intake.logRefusals(ctx, [
            { handover: { entity: body.entity, source: body.source ?? null }, error },
          ]);
          throw error;
        }
        const handovers = body.batch.map((lead, index) => {
          try {
            const handover = readS1Lead({ ...lead, entity: body.entity }, ctx.modules, {
              source: body.source ?? null,
            });
            // The call's note goes to every lead; a blank one to none, which each lead's answer says.
            if (body.note !== undefined && isNoteText(body.note)) handover.notes.push({ body: body.note });
            else if (body.note !== undefined) handover.warnings.push(blankNoteWarning('note'));
            return handover;
          } catch (error) {
            if (error instanceof AppError && error.details) {
              throw new AppError(error.code, {
                details: error.details.map((d) => ({ ...d, key: `batch.${index}.${d.key}` })),
              });
            }
            throw error;
          }
        });
        const answered = await intake.intakeAll(
          ctx,
          handovers,
          (outcomes) => ({
            status: 'success' as const,
            created: outcomes.map((outcome, index) => ({
              lead_id: outcome.recordId,
              email: outcome.email,
              ...s1Extras(handovers[index]!, outcome),
            })),
          }),
          store,
        );
        return { status: 200, body: answered };
      };
      return onceByKey(ctx, S1_BULK_SCOPE, idempotencyKeyOf(undefined, headerKey), body, work, {
        errorBody: s1Body,
      });
    },
  };
}

export type IntakeApi = ReturnType<typeof createIntakeApi>;
