import { ApiError } from '../lib/api.ts';
import { type Translate, useT } from '../lib/i18n.tsx';
import { uiMessages } from './messages.ts';

/** A sentence for a failed call, in the current language (the service's message as fallback). */
export function describeError(error: unknown, t: Translate<typeof uiMessages.en>): string {
  if (error instanceof ApiError) {
    if (error.status === 0) return t('networkError');
    if (error.status === 429) return t('rateLimited', { seconds: error.retryAfter ?? 60 });
    if (error.code === 'forbidden') return t('forbidden');
    return error.message && error.message !== error.code
      ? error.message
      : t('genericError', { code: error.code });
  }
  return error instanceof Error ? error.message : String(error);
}

export function useDescribeError(): (error: unknown) => string {
  const t = useT(uiMessages);
  return (error) => describeError(error, t);
}

/** An error shown in place, announced to screen readers. */
export function ErrorText({ error }: { error: unknown }) {
  const describe = useDescribeError();
  if (!error) return null;
  return (
    <p className="error-text" role="alert">
      {describe(error)}
    </p>
  );
}

/**
 * The service's 422 details that no field of the form shows (keyed elsewhere, e.g. an
 * automation an entity change would break), each with its key and message.
 */
export function DetailList({ details }: { details: [string, string][] }) {
  if (details.length === 0) return null;
  return (
    <ul className="error-text" role="alert">
      {details.map(([key, message]) => (
        <li key={key}>
          <code>{key}</code>: {message}
        </li>
      ))}
    </ul>
  );
}
