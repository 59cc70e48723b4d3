// Users and roles (decisions §14), the owner's: list, add, change role, remove. The service
// keeps one owner at least; its 409 last_owner is shown as it comes.
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Button } from 'react-aria-components';
import { ApiError, api } from '../../lib/api.ts';
import { useFormat, useLocale, useT } from '../../lib/i18n.tsx';
import { ROLES, useSession } from '../../lib/session.tsx';
import { ErrorText, useDescribeError } from '../../ui/errors.tsx';
import { SelectField, TextField } from '../../ui/fields.tsx';
import { Loading, PageTitle } from '../../ui/pages.tsx';
import { type ColumnDef, DataTable } from '../../ui/table.tsx';
import { useToast } from '../../ui/toast.tsx';
import type { User } from './api.ts';
import { messages } from './messages.ts';
import { CheckboxField, ConfirmButton, errorsOf, SettingsNav } from './parts.tsx';

const USERS = ['settings', 'users'] as const;

export function UsersScreen() {
  const t = useT(messages);
  const format = useFormat();
  const toast = useToast();
  const describe = useDescribeError();
  const session = useSession();
  const client = useQueryClient();
  const list = useQuery({
    queryKey: USERS,
    queryFn: ({ signal }) =>
      api<{ users: User[] }>('/api/v1/settings/users', { query: { limit: 500 }, signal }),
  });
  const [email, setEmail] = useState('');
  const [name, setName] = useState('');
  const [role, setRole] = useState<string>('member');
  const [invite, setInvite] = useState(true);
  const { locale } = useLocale();
  const [refusal, setRefusal] = useState<string | null>(null);
  const explain = (error: unknown) =>
    error instanceof ApiError && error.code === 'last_owner' ? t('lastOwner') : describe(error);

  const create = useMutation({
    mutationFn: () =>
      api<User>('/api/v1/settings/users', {
        method: 'POST',
        // The invitation goes out in the language this console speaks.
        body: {
          email: email.trim(),
          name: name.trim(),
          role,
          ...(invite ? { invite, language: locale } : {}),
        },
      }),
    onSuccess: (user) => {
      toast.show(t(user.invited_until ? 'userInvited' : 'userAdded', { name: user.name }));
      setEmail('');
      setName('');
      setRole('member');
      void client.invalidateQueries({ queryKey: USERS });
    },
  });
  const changeRole = useMutation({
    mutationFn: ({ user, next }: { user: User; next: string }) =>
      api<User>(`/api/v1/settings/users/${user.id}`, { method: 'PATCH', body: { role: next } }),
    onSuccess: (user) => {
      setRefusal(null);
      toast.show(t('roleChanged', { name: user.name, role: t(`roleName.${user.role}`) }));
      void client.invalidateQueries({ queryKey: USERS });
      if (user.id === session.user.id) void client.invalidateQueries({ queryKey: ['session'] });
    },
    onError: (error) => {
      setRefusal(explain(error));
      void client.invalidateQueries({ queryKey: USERS });
    },
  });
  const remove = useMutation({
    mutationFn: (user: User) => api(`/api/v1/settings/users/${user.id}`, { method: 'DELETE' }),
    onSuccess: (_, user) => {
      setRefusal(null);
      toast.show(t('userRemoved', { name: user.name }));
      void client.invalidateQueries({ queryKey: USERS });
    },
    onError: (error) => setRefusal(explain(error)),
  });
  const errors = errorsOf(create.error);
  const roleOptions = ROLES.map((r) => ({ id: r, label: t(`roleName.${r}`) }));

  const columns: ColumnDef<User>[] = [
    { id: 'name', label: t('name'), render: (u) => u.name, alwaysVisible: true },
    { id: 'email', label: t('email'), render: (u) => u.email },
    {
      id: 'role',
      label: t('role'),
      render: (u) => (
        <select
          className="inline-select"
          aria-label={t('roleOf', { name: u.name })}
          value={u.role}
          disabled={changeRole.isPending}
          onChange={(event) => changeRole.mutate({ user: u, next: event.target.value })}
        >
          {roleOptions.map((option) => (
            <option key={option.id} value={option.id}>
              {option.label}
            </option>
          ))}
        </select>
      ),
    },
    { id: 'created', label: t('created'), render: (u) => format.date(u.created_at) },
    {
      id: 'actions',
      label: t('actions'),
      render: (u) => (
        <ConfirmButton
          label={t('remove')}
          title={t('removeUserTitle', { name: u.name })}
          text={u.id === session.user.id ? t('removeSelfText') : t('removeUserText')}
          confirmLabel={t('remove')}
          onConfirm={() => remove.mutate(u)}
        />
      ),
    },
  ];
  return (
    <section>
      <SettingsNav />
      <PageTitle>{t('users')}</PageTitle>
      <p className="muted">{t('usersIntro')}</p>
      {refusal ? (
        <p className="error-text panel" role="alert">
          {refusal}
        </p>
      ) : null}
      {list.isPending ? <Loading /> : null}
      <ErrorText error={list.error} />
      {list.data ? (
        <DataTable label={t('users')} columns={columns} rows={list.data.users} rowId={(u) => u.id} />
      ) : null}
      <form
        className="panel form"
        aria-labelledby="add-user"
        onSubmit={(event) => {
          event.preventDefault();
          create.mutate();
        }}
      >
        <h2 id="add-user">{t('addUser')}</h2>
        <div className="grid-2">
          <TextField
            label={t('email')}
            type="email"
            autoComplete="off"
            value={email}
            onChange={setEmail}
            isRequired
            error={errors.email}
          />
          <TextField label={t('name')} value={name} onChange={setName} isRequired error={errors.name} />
        </div>
        <SelectField
          label={t('role')}
          value={role}
          onChange={setRole}
          options={roleOptions}
          error={errors.role}
        />
        <p className="muted small">{t('rolesHelp')}</p>
        <CheckboxField label={t('sendInvitation')} isSelected={invite} onChange={setInvite} />
        <ErrorText error={create.error && Object.keys(errors).length === 0 ? create.error : null} />
        <div>
          <Button
            type="submit"
            className="button primary"
            isDisabled={create.isPending || email.trim() === '' || name.trim() === ''}
          >
            {t('addUser')}
          </Button>
        </div>
      </form>
    </section>
  );
}
