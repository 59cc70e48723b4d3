import { actorOf, type Credential, senderNameOf } from '../../http/auth.ts';
import { AppError, type ValidationDetail } from '../../http/errors.ts';
import {
  DOCUMENT_REF_KEYS,
  type DocumentRef,
  type DocumentsService,
} from '../documents/documents.service.ts';
import type { Warning } from '../intake/intake.service.ts';
import { blankNoteWarning, isNoteText } from '../notes/note-text.ts';
import type { NotesService } from '../notes/notes.service.ts';
import { reportUnmapped } from './field-values.ts';
import type { ChangeContext, RecordsService } from './records.service.ts';

/** PATCH endpoints over records, documents and notes. */
export function createRecordsApi({
  records,
  documents,
  notes,
}: {
  records: RecordsService;
  documents: DocumentsService;
  notes: NotesService;
}) {
  return {
    /** PATCH /api/v1/records/{id} (scope null) and PATCH /api/v1/records (the record token's scope). */
    async patch(
      ctx: ChangeContext,
      recordId: string,
      body: { fields?: Record<string, unknown>; documents?: DocumentRef[] },
      scope: string[] | null,
    ) {
      const submitted = body.fields
        ? Object.keys(body.fields).map((key) => [key, body.fields![key]] as [string, unknown])
        : [];
      // A document's key it does not take is a warning, or with a strict key a refusal (as on intake).
      const unknownKeys: ValidationDetail[] = [];
      const reported = { problems: unknownKeys, warnings: [] as Warning[] };
      const refs = (body.documents ?? []).map((document, index) => {
        for (const key of Object.keys(document)) {
          if (!DOCUMENT_REF_KEYS.has(key))
            reportUnmapped(
              ctx.strict,
              `documents.${index}.${key}`,
              'a document takes url, name and field',
              reported,
            );
        }
        return { url: document.url, name: document.name, field: document.field };
      });
      if (unknownKeys.length > 0) throw new AppError('validation_failed', { details: unknownKeys });
      // Documents are fetched before the values change, outside any transaction.
      const fetched = refs.length
        ? await documents.fetchForRecord(ctx.accountId, recordId, refs, {
            scope,
            allowPool: scope === null,
          })
        : null;
      const change = await records.changeValues(ctx, recordId, submitted, scope);
      const attached = fetched ? await documents.attach(ctx, recordId, fetched) : 0;
      return {
        id: recordId,
        entity: change.entityKey,
        updated: change.changed.length > 0 || attached > 0,
        fields: change.changed,
        documents: attached,
        warnings: [...reported.warnings, ...change.warnings, ...(fetched?.warnings ?? [])],
      };
    },

    /** PATCH /api/leads/{id} (S1). */
    async patchLead(
      ctx: ChangeContext,
      leadId: string,
      body: { fields: Record<string, unknown>; note?: string },
      credential: Exclude<Credential, { kind: 'admin' }>,
    ) {
      const submitted = Object.keys(body.fields).map((key) => [key, body.fields[key]] as [string, unknown]);
      const change = await records.changeValues(ctx, leadId, submitted, null);
      const warnings = [...change.warnings];
      if (body.note !== undefined && !isNoteText(body.note)) warnings.push(blankNoteWarning('note'));
      else if (body.note !== undefined) {
        const caller = credential.kind === 'api_key' || credential.kind === 'session' ? credential : null;
        await notes.add(
          {
            accountId: ctx.accountId,
            keyName: caller ? senderNameOf(caller) : null,
            actor: caller ? actorOf(caller) : undefined,
            requestId: ctx.requestId,
          },
          { body: body.note, record: leadId },
        );
      }
      return {
        status: 'success' as const,
        lead_id: leadId,
        updated_fields: change.changed,
        ...(warnings.length > 0 ? { warnings } : {}),
      };
    },
  };
}

export type RecordsApi = ReturnType<typeof createRecordsApi>;
