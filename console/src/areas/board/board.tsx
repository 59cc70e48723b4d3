// The Kanban board of one pipeline (decisions §7): a column per stage, newest records first, paged
// per column. Moving a card is the public stage move, shown at once and taken back when the
// service refuses it; the columns read again every few seconds while the tab is visible.
import {
  type InfiniteData,
  useInfiniteQuery,
  useIsMutating,
  useMutation,
  useQuery,
  useQueryClient,
} from '@tanstack/react-query';
import { useMemo } from 'react';
import {
  Button,
  GridList,
  GridListItem,
  isTextDropItem,
  Link,
  Menu,
  MenuItem,
  MenuTrigger,
  Popover,
  useDragAndDrop,
} from 'react-aria-components';
import { useSearchParams } from 'react-router';
import { ApiError } from '../../lib/api.ts';
import { type Locale, useLocale, useT } from '../../lib/i18n.tsx';
import { useSession } from '../../lib/session.tsx';
import { ErrorText, useDescribeError } from '../../ui/errors.tsx';
import { SelectField } from '../../ui/fields.tsx';
import { Loading, PageTitle } from '../../ui/pages.tsx';
import { useToast } from '../../ui/toast.tsx';
import {
  type BoardPage,
  type BoardRecord,
  fetchColumn,
  fetchEntities,
  fetchPipelines,
  moveRecord,
} from './api.ts';
import { messages } from './messages.ts';
import './board.css';

/** How often the columns are read again while the tab is visible. */
const LIVE_INTERVAL_MS = 4000;
/** What a dragged card carries: its id, name and the stage it comes from. */
const DRAG_TYPE = 'application/x-leadline-record';
const MOVE_KEY = ['board-move'] as const;

export const PIPELINES_KEY = ['crm-pipelines'] as const;
export const ENTITIES_KEY = ['entities'] as const;

type ColumnData = InfiniteData<BoardPage, string | null>;

interface BoardTarget {
  entity: string;
  pipeline: string;
}

function columnKey(target: BoardTarget, stage: string) {
  return ['board', target.entity, target.pipeline, stage] as const;
}

/** "3 days", "5 hours", "12 minutes" in the current language. */
function duration(locale: Locale, seconds: number): string {
  const tag = locale === 'de' ? 'de-DE' : 'en-GB';
  const [value, unit] =
    seconds >= 86_400
      ? [Math.floor(seconds / 86_400), 'day']
      : seconds >= 3600
        ? [Math.floor(seconds / 3600), 'hour']
        : [Math.max(1, Math.floor(seconds / 60)), 'minute'];
  return new Intl.NumberFormat(tag, { style: 'unit', unit, unitDisplay: 'long' }).format(value);
}

/** "3 days ago" in the current language. */
function ago(locale: Locale, seconds: number): string {
  const tag = locale === 'de' ? 'de-DE' : 'en-GB';
  const format = new Intl.RelativeTimeFormat(tag, { numeric: 'auto' });
  if (seconds >= 86_400) return format.format(-Math.floor(seconds / 86_400), 'day');
  if (seconds >= 3600) return format.format(-Math.floor(seconds / 3600), 'hour');
  return format.format(-Math.floor(seconds / 60), 'minute');
}

function secondsSince(iso: string | undefined | null): number | null {
  if (!iso) return null;
  const at = Date.parse(iso);
  return Number.isNaN(at) ? null : Math.max(0, (Date.now() - at) / 1000);
}

export function BoardScreen() {
  const t = useT(messages);
  const session = useSession();
  const [params, setParams] = useSearchParams();
  const hasCrm = session.hasModule('crm');
  const pipelines = useQuery({
    queryKey: PIPELINES_KEY,
    queryFn: ({ signal }) => fetchPipelines(signal),
    enabled: hasCrm,
  });
  const entities = useQuery({ queryKey: ENTITIES_KEY, queryFn: ({ signal }) => fetchEntities(signal) });

  const options = useMemo(() => {
    const names = new Map((entities.data?.entities ?? []).map((e) => [e.key, e.name]));
    return (pipelines.data?.entities ?? []).flatMap((entity) =>
      entity.pipelines.map((pipeline) => ({
        id: JSON.stringify([entity.key, pipeline.name]),
        entity: entity.key,
        entityName: names.get(entity.key) ?? entity.key,
        pipeline: pipeline.name,
        stages: pipeline.stages,
      })),
    );
  }, [pipelines.data, entities.data]);

  if (!hasCrm) {
    return (
      <section>
        <PageTitle>{t('title')}</PageTitle>
        <p>{t('noModule')}</p>
      </section>
    );
  }
  if (pipelines.isPending || entities.isPending) {
    return (
      <section>
        <PageTitle>{t('title')}</PageTitle>
        <Loading />
        <ErrorText error={pipelines.error ?? entities.error} />
      </section>
    );
  }
  const wanted = JSON.stringify([params.get('entity'), params.get('pipeline')]);
  const chosen = options.find((option) => option.id === wanted) ?? options[0];
  const entity = entities.data?.entities.find((e) => e.key === chosen?.entity);
  const emailField = entity?.fields.find((f) => f.role === 'email')?.key ?? null;

  return (
    <section className="board-page">
      <PageTitle
        actions={
          options.length > 1 && chosen ? (
            <SelectField
              label={t('choose')}
              value={chosen.id}
              options={options.map((o) => ({
                id: o.id,
                label: t('chooseOption', { entity: o.entityName, pipeline: o.pipeline }),
              }))}
              onChange={(id) => {
                const next = options.find((o) => o.id === id);
                if (next) setParams({ entity: next.entity, pipeline: next.pipeline });
              }}
            />
          ) : undefined
        }
      >
        {chosen ? t('titleWith', { pipeline: chosen.pipeline }) : t('title')}
      </PageTitle>
      <ErrorText error={pipelines.error ?? entities.error} />
      {!chosen ? <p>{t('noPipelines')}</p> : null}
      {chosen ? (
        <Board
          key={chosen.id}
          target={{ entity: chosen.entity, pipeline: chosen.pipeline }}
          stages={chosen.stages}
          emailField={emailField}
        />
      ) : null}
    </section>
  );
}

interface MoveRequest {
  record: BoardRecord;
  from: string;
  to: string;
}

function Board({
  target,
  stages,
  emailField,
}: {
  target: BoardTarget;
  stages: string[];
  emailField: string | null;
}) {
  const t = useT(messages);
  const session = useSession();
  const client = useQueryClient();
  const toast = useToast();
  const describe = useDescribeError();
  const canMove = session.can('stages:write');

  const move = useMutation({
    mutationKey: MOVE_KEY,
    mutationFn: ({ record, to }: MoveRequest) =>
      moveRecord(record.id, { pipeline: target.pipeline, stage: to }),
    // The card moves at once; the two columns are kept to be put back if the service refuses.
    onMutate: async ({ record, from, to }) => {
      const fromKey = columnKey(target, from);
      const toKey = columnKey(target, to);
      await Promise.all([
        client.cancelQueries({ queryKey: fromKey }),
        client.cancelQueries({ queryKey: toKey }),
      ]);
      const before = {
        from: client.getQueryData<ColumnData>(fromKey),
        to: client.getQueryData<ColumnData>(toKey),
      };
      const now = new Date().toISOString();
      const moved: BoardRecord = {
        ...record,
        updated_at: now,
        crm: { pipeline: target.pipeline, stage: to, entered_at: now },
      };
      client.setQueryData<ColumnData>(fromKey, (data) =>
        data
          ? {
              ...data,
              pages: data.pages.map((page) => ({
                ...page,
                records: page.records.filter((r) => r.id !== record.id),
              })),
            }
          : data,
      );
      client.setQueryData<ColumnData>(toKey, (data) =>
        data
          ? {
              ...data,
              pages: data.pages.map((page, index) =>
                index === 0
                  ? { ...page, records: [moved, ...page.records.filter((r) => r.id !== record.id)] }
                  : page,
              ),
            }
          : data,
      );
      return before;
    },
    onError: (error, { record, from, to }, before) => {
      if (before) {
        client.setQueryData(columnKey(target, from), before.from);
        client.setQueryData(columnKey(target, to), before.to);
      }
      const stageRefused =
        error instanceof ApiError &&
        error.code === 'validation_failed' &&
        Array.isArray(error.details) &&
        (error.details as Array<{ key?: string }>).some((d) => d.key === 'stage');
      toast.show(
        t('moveRefused', {
          name: record.name || record.id,
          stage: to,
          reason: stageRefused ? t('stageGone') : describe(error),
        }),
        'error',
      );
      // A refused stage may be gone: read the pipeline again so that its column goes too.
      if (stageRefused) void client.invalidateQueries({ queryKey: PIPELINES_KEY });
    },
    onSuccess: (answer, { record }) => {
      toast.show(t('moved', { name: record.name || record.id, stage: answer.crm.stage }));
    },
    onSettled: (_answer, _error, { from, to }) =>
      Promise.all([
        client.invalidateQueries({ queryKey: columnKey(target, from) }),
        client.invalidateQueries({ queryKey: columnKey(target, to) }),
      ]),
  });

  const request = (record: BoardRecord, from: string, to: string) => {
    if (from !== to) move.mutate({ record, from, to });
  };

  return (
    <>
      {canMove ? null : <p className="muted">{t('readOnly')}</p>}
      <p className="muted board-live">{t('live')}</p>
      {/* biome-ignore lint/a11y/noNoninteractiveTabindex: the scrolling region must be reachable by keyboard at narrow widths */}
      <section className="board" aria-label={t('board', { pipeline: target.pipeline })} tabIndex={0}>
        {stages.map((stage) => (
          <Column
            key={stage}
            target={target}
            stage={stage}
            stages={stages}
            emailField={emailField}
            canMove={canMove}
            onMove={request}
          />
        ))}
      </section>
    </>
  );
}

function Column({
  target,
  stage,
  stages,
  emailField,
  canMove,
  onMove,
}: {
  target: BoardTarget;
  stage: string;
  stages: string[];
  emailField: string | null;
  canMove: boolean;
  onMove(record: BoardRecord, from: string, to: string): void;
}) {
  const t = useT(messages);
  // While a move is on its way, reading the columns again could show the card where it was.
  const moving = useIsMutating({ mutationKey: MOVE_KEY }) > 0;
  const column = useInfiniteQuery({
    queryKey: columnKey(target, stage),
    queryFn: ({ pageParam, signal }) => fetchColumn({ ...target, stage }, pageParam, signal),
    initialPageParam: null as string | null,
    getNextPageParam: (last) => last.next_cursor,
    refetchInterval: moving ? false : LIVE_INTERVAL_MS,
    refetchIntervalInBackground: false,
  });
  const records = useMemo(() => column.data?.pages.flatMap((page) => page.records) ?? [], [column.data]);
  const byId = useMemo(() => new Map(records.map((r) => [r.id, r])), [records]);

  const { dragAndDropHooks } = useDragAndDrop({
    getItems: (keys) =>
      [...keys].flatMap((key) => {
        const record = byId.get(String(key));
        return record
          ? [{ [DRAG_TYPE]: JSON.stringify({ record, from: stage }), 'text/plain': record.name || record.id }]
          : [];
      }),
    acceptedDragTypes: [DRAG_TYPE],
    getDropOperation: () => 'move',
    onDrop: async (event) => {
      for (const item of event.items) {
        if (!isTextDropItem(item) || !item.types.has(DRAG_TYPE)) continue;
        const { record, from } = JSON.parse(await item.getText(DRAG_TYPE)) as {
          record: BoardRecord;
          from: string;
        };
        onMove(record, from, stage);
      }
    },
  });

  const headingId = `column-${stages.indexOf(stage)}`;
  const count = `${records.length}${column.hasNextPage ? '+' : ''}`;
  return (
    <section className="board-column" aria-labelledby={headingId}>
      <h2 id={headingId}>{t('column', { stage, count })}</h2>
      <ErrorText error={column.error} />
      {column.isPending ? <Loading /> : null}
      <GridList
        aria-label={t('columnLabel', { stage })}
        className="board-cards"
        items={records}
        dragAndDropHooks={canMove ? dragAndDropHooks : undefined}
        renderEmptyState={() => <p className="board-empty">{column.isPending ? '' : t('empty')}</p>}
      >
        {(record) => (
          <Card
            record={record}
            stage={stage}
            stages={stages}
            emailField={emailField}
            canMove={canMove}
            onMove={onMove}
          />
        )}
      </GridList>
      {column.hasNextPage ? (
        <Button
          className="button secondary board-more"
          isDisabled={column.isFetchingNextPage}
          onPress={() => void column.fetchNextPage()}
        >
          {t('more', { stage })}
        </Button>
      ) : null}
    </section>
  );
}

function Card({
  record,
  stage,
  stages,
  emailField,
  canMove,
  onMove,
}: {
  record: BoardRecord;
  stage: string;
  stages: string[];
  emailField: string | null;
  canMove: boolean;
  onMove(record: BoardRecord, from: string, to: string): void;
}) {
  const t = useT(messages);
  const { locale } = useLocale();
  const name = record.name || record.id;
  const email = emailField ? record.fields[emailField] : null;
  const age = secondsSince(record.created_at);
  const inStage = secondsSince(record.crm?.entered_at);
  return (
    <GridListItem id={record.id} textValue={name} className="board-card">
      <div className="board-card-head">
        {canMove ? (
          <Button slot="drag" className="board-drag" aria-label={t('dragHandle', { name })}>
            <span aria-hidden="true">⠿</span>
          </Button>
        ) : null}
        <Link className="board-card-name" href={`/records/${record.id}`}>
          {name}
        </Link>
      </div>
      {typeof email === 'string' && email !== '' ? <div className="board-card-line">{email}</div> : null}
      {record.source ? (
        <div className="board-card-line muted">{t('source', { source: record.source })}</div>
      ) : null}
      <div className="board-card-line muted">
        {age !== null ? <span>{t('age', { age: ago(locale, age) })}</span> : null}
        {inStage !== null ? <span>{t('inStage', { time: duration(locale, inStage) })}</span> : null}
      </div>
      {canMove ? (
        <MenuTrigger>
          <Button className="button secondary board-move" aria-label={t('moveMenu', { name })}>
            {t('moveTo')}
          </Button>
          <Popover className="popover">
            <Menu
              className="listbox"
              aria-label={t('moveMenu', { name })}
              onAction={(key) => onMove(record, stage, String(key))}
              items={stages.filter((s) => s !== stage).map((s) => ({ id: s }))}
            >
              {(item) => (
                <MenuItem className="listbox-item" id={item.id} textValue={item.id}>
                  {item.id}
                </MenuItem>
              )}
            </Menu>
          </Popover>
        </MenuTrigger>
      ) : null}
    </GridListItem>
  );
}
