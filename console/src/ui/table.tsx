// A table whose columns a person picks (remembered in localStorage), with cursor paging.
import { type ReactNode, useCallback, useState } from 'react';
import {
  Button,
  Cell,
  Checkbox,
  CheckboxGroup,
  Column,
  Dialog,
  DialogTrigger,
  Label,
  Popover,
  Row,
  Table,
  TableBody,
  TableHeader,
} from 'react-aria-components';
import { useT } from '../lib/i18n.tsx';
import { ErrorText } from './errors.tsx';
import { uiMessages } from './messages.ts';
import { Loading } from './pages.tsx';

export interface ColumnDef<T> {
  id: string;
  label: string;
  render(row: T): ReactNode;
  /** Shown until the person picks otherwise. */
  defaultVisible?: boolean;
  /** Cannot be hidden (the column that names the row). */
  alwaysVisible?: boolean;
}

function readStored(key: string): string[] | null {
  try {
    const value = JSON.parse(localStorage.getItem(key) ?? 'null');
    return Array.isArray(value) && value.every((item) => typeof item === 'string') ? value : null;
  } catch {
    return null;
  }
}

/** The visible column ids, remembered under `storageKey`. */
export function useColumnChoice<T>(storageKey: string, columns: readonly ColumnDef<T>[]) {
  const [chosen, setChosen] = useState<string[]>(
    () => readStored(storageKey) ?? columns.filter((c) => c.defaultVisible !== false).map((c) => c.id),
  );
  const choose = useCallback(
    (ids: string[]) => {
      setChosen(ids);
      localStorage.setItem(storageKey, JSON.stringify(ids));
    },
    [storageKey],
  );
  const visible = columns.filter((column) => column.alwaysVisible || chosen.includes(column.id));
  return { chosen, choose, visible };
}

export function ColumnPicker<T>({
  columns,
  chosen,
  onChange,
}: {
  columns: readonly ColumnDef<T>[];
  chosen: string[];
  onChange(ids: string[]): void;
}) {
  const t = useT(uiMessages);
  return (
    <DialogTrigger>
      <Button className="button secondary">{t('columns')}</Button>
      <Popover className="popover" placement="bottom end">
        <Dialog className="dialog column-picker" aria-label={t('columnsFor')}>
          <CheckboxGroup value={chosen} onChange={onChange} className="checkbox-group">
            <Label>{t('columnsFor')}</Label>
            {columns.map((column) => (
              <Checkbox
                key={column.id}
                value={column.id}
                isDisabled={column.alwaysVisible}
                className="checkbox"
              >
                <span className="checkbox-box" aria-hidden="true" />
                {column.label}
              </Checkbox>
            ))}
          </CheckboxGroup>
        </Dialog>
      </Popover>
    </DialogTrigger>
  );
}

export interface DataTableProps<T> {
  label: string;
  columns: readonly ColumnDef<T>[];
  rows: readonly T[];
  rowId(row: T): string;
  /** Makes each row a link (Enter opens it). */
  rowHref?(row: T): string;
  empty?: ReactNode;
}

export function DataTable<T>({ label, columns, rows, rowId, rowHref, empty }: DataTableProps<T>) {
  const t = useT(uiMessages);
  return (
    <ScrollArea label={label}>
      <Table aria-label={label} className="table">
        <TableHeader columns={columns}>
          {(column) => (
            <Column id={column.id} isRowHeader={column.alwaysVisible === true}>
              {column.label}
            </Column>
          )}
        </TableHeader>
        {/* The rows render again when the columns change (RAC caches rows by item otherwise). */}
        <TableBody items={rows} dependencies={[columns]} renderEmptyState={() => empty ?? t('noRows')}>
          {(row) => (
            <Row id={rowId(row)} columns={columns} href={rowHref?.(row)}>
              {(column) => <Cell>{column.render(row)}</Cell>}
            </Row>
          )}
        </TableBody>
      </Table>
    </ScrollArea>
  );
}

/** A region that scrolls sideways on narrow screens; it takes the focus, so arrow keys scroll it. */
export function ScrollArea({ label, children }: { label: string; children: ReactNode }) {
  return (
    // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling region must be reachable by keyboard
    <section className="table-scroll" tabIndex={0} aria-label={label}>
      {children}
    </section>
  );
}

/** Cursor paging: remembers the cursors of earlier pages so that "previous" works too. */
export function useCursorPages() {
  const [stack, setStack] = useState<(string | null)[]>([null]);
  const cursor = stack[stack.length - 1] ?? null;
  return {
    cursor,
    page: stack.length,
    next: (nextCursor: string) => setStack((s) => [...s, nextCursor]),
    previous: () => setStack((s) => (s.length > 1 ? s.slice(0, -1) : s)),
    reset: () => setStack([null]),
  };
}

export function Pager({
  page,
  hasNext,
  onNext,
  onPrevious,
}: {
  page: number;
  hasNext: boolean;
  onNext(): void;
  onPrevious(): void;
}) {
  const t = useT(uiMessages);
  return (
    <nav className="pager" aria-label={t('pageNumber', { page })}>
      <Button className="button secondary" isDisabled={page <= 1} onPress={onPrevious}>
        {t('previousPage')}
      </Button>
      <span aria-live="polite">{t('pageNumber', { page })}</span>
      <Button className="button secondary" isDisabled={!hasNext} onPress={onNext}>
        {t('nextPage')}
      </Button>
    </nav>
  );
}

/** A cursor-paged list as screens show it: loading, the error, the table of a page and its pager. */
export function PagedTable<T, D extends { next_cursor: string | null }>({
  query,
  rowsOf,
  pages,
  ...table
}: Omit<DataTableProps<T>, 'rows'> & {
  query: { isPending: boolean; error: unknown; data?: D };
  rowsOf(data: D): readonly T[];
  pages: ReturnType<typeof useCursorPages>;
}) {
  const data = query.data;
  return (
    <>
      {query.isPending ? <Loading /> : null}
      <ErrorText error={query.error} />
      {data ? (
        <>
          <DataTable {...table} rows={rowsOf(data)} />
          <Pager
            page={pages.page}
            hasNext={Boolean(data.next_cursor)}
            onNext={() => data.next_cursor && pages.next(data.next_cursor)}
            onPrevious={pages.previous}
          />
        </>
      ) : null}
    </>
  );
}
