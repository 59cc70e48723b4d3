// Pieces the settings screens share: a checkbox with its label, a confirming button, a secret
// shown once with a copy button, and the settings sub-navigation.
import { type ReactNode, useState } from 'react';
import { Button, Checkbox, Dialog, DialogTrigger, Heading, Modal, ModalOverlay } from 'react-aria-components';
import { NavLink } from 'react-router';
import { fieldErrors } from '../../lib/api.ts';
import { useT } from '../../lib/i18n.tsx';
import type { Capability } from '../../lib/session.tsx';
import { useSession } from '../../lib/session.tsx';
import { messages } from './messages.ts';
import './settings.css';

export function CheckboxField({
  label,
  isSelected,
  onChange,
  isDisabled,
  description,
}: {
  label: string;
  isSelected: boolean;
  onChange(value: boolean): void;
  isDisabled?: boolean;
  description?: string;
}) {
  return (
    <div className="checkbox-field">
      <Checkbox className="checkbox" isSelected={isSelected} onChange={onChange} isDisabled={isDisabled}>
        <span className="checkbox-box" aria-hidden="true" />
        {label}
      </Checkbox>
      {description ? <span className="muted small">{description}</span> : null}
    </div>
  );
}

/** A button that asks first (a modal dialog); `onConfirm` runs on "yes". */
export function ConfirmButton({
  label,
  title,
  text,
  confirmLabel,
  onConfirm,
  isDisabled,
  danger = true,
}: {
  label: string;
  title: string;
  text: ReactNode;
  confirmLabel: string;
  onConfirm(): void;
  isDisabled?: boolean;
  danger?: boolean;
}) {
  const t = useT(messages);
  return (
    <DialogTrigger>
      <Button className={`button ${danger ? 'danger' : 'secondary'}`} isDisabled={isDisabled}>
        {label}
      </Button>
      <ModalOverlay className="modal-overlay" isDismissable>
        <Modal className="modal">
          <Dialog className="dialog" role="alertdialog">
            {({ close }) => (
              <>
                <Heading slot="title">{title}</Heading>
                <div>{text}</div>
                <div className="dialog-actions">
                  <Button className="button secondary" onPress={close} autoFocus>
                    {t('cancel')}
                  </Button>
                  <Button
                    className={`button ${danger ? 'danger' : 'primary'}`}
                    onPress={() => {
                      close();
                      onConfirm();
                    }}
                  >
                    {confirmLabel}
                  </Button>
                </div>
              </>
            )}
          </Dialog>
        </Modal>
      </ModalOverlay>
    </DialogTrigger>
  );
}

/** A secret (API key, source token, webhook secret) shown once, with a copy button. */
export function SecretOnce({
  title,
  value,
  onDone,
  children,
}: {
  title: string;
  value: string;
  onDone(): void;
  children?: ReactNode;
}) {
  const t = useT(messages);
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(value);
      setCopied(true);
    } catch {
      // No clipboard (an insecure origin, a refusal): the value is selected for copying by hand.
      const input = document.getElementById('secret-value') as HTMLInputElement | null;
      input?.select();
    }
  };
  return (
    <section className="panel secret" aria-labelledby="secret-title">
      <h2 id="secret-title">{title}</h2>
      <p className="warning-text">
        <strong>{t('secretOnce')}</strong>
      </p>
      <div className="secret-row">
        <label htmlFor="secret-value" className="visually-hidden">
          {title}
        </label>
        <input
          id="secret-value"
          className="secret-value"
          readOnly
          value={value}
          onFocus={(event) => event.currentTarget.select()}
        />
        <Button className="button primary" onPress={() => void copy()}>
          {t('copy')}
        </Button>
      </div>
      <p role="status" className="notice">
        {copied ? t('copied') : ''}
      </p>
      {children}
      <Button className="button secondary" onPress={onDone}>
        {t('secretDone')}
      </Button>
    </section>
  );
}

/** The settings pages, as tabs above each of them. */
export function SettingsNav() {
  const t = useT(messages);
  const session = useSession();
  const entries: { to: string; label: string; module?: string; capability?: Capability }[] = [
    { to: '/settings/api-keys', label: t('apiKeys') },
    { to: '/settings/sources', label: t('sources') },
    { to: '/settings/entities', label: t('entities') },
    { to: '/settings/pipelines', label: t('pipelinesAndAutomations'), module: 'crm' },
    { to: '/settings/distribution', label: t('distributionSetup'), module: 'distribution' },
    { to: '/settings/calendars', label: t('calendars'), module: 'booking' },
    { to: '/settings/webhooks', label: t('webhooks') },
    { to: '/settings/users', label: t('users'), capability: 'users' },
  ];
  return (
    <nav className="settings-nav" aria-label={t('settingsNavigation')}>
      <ul>
        {entries
          .filter((entry) => !entry.module || session.hasModule(entry.module))
          .filter((entry) => !entry.capability || session.can(entry.capability))
          .map((entry) => (
            <li key={entry.to}>
              <NavLink to={entry.to}>{entry.label}</NavLink>
            </li>
          ))}
      </ul>
    </nav>
  );
}

/** Errors of a failed save by key, for the fields; `prefix` strips a path (`fields.0.`). */
export function errorsOf(error: unknown): Record<string, string> {
  return fieldErrors(error);
}

/** Lines of a text area, trimmed, without empty ones. */
export function lines(text: string): string[] {
  return text
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '');
}
