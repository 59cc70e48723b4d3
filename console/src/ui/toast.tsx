// Status messages after an action ("Saved", "Note added", failures), announced to screen readers
// through a polite live region (errors: assertive) and dismissed after a few seconds.
import { createContext, type ReactNode, useCallback, useContext, useMemo, useRef, useState } from 'react';
import { Button } from 'react-aria-components';
import { useT } from '../lib/i18n.tsx';
import { uiMessages } from './messages.ts';

type Tone = 'success' | 'error' | 'info';
interface Toast {
  id: number;
  text: string;
  tone: Tone;
}

interface ToastApi {
  show(text: string, tone?: Tone): void;
}

const ToastContext = createContext<ToastApi>({ show: () => {} });
const LIFETIME_MS = 6000;

export function ToastProvider({ children }: { children: ReactNode }) {
  const t = useT(uiMessages);
  const [toasts, setToasts] = useState<Toast[]>([]);
  const next = useRef(1);
  const dismiss = useCallback(
    (id: number) => setToasts((list) => list.filter((toast) => toast.id !== id)),
    [],
  );
  const show = useCallback(
    (text: string, tone: Tone = 'success') => {
      const id = next.current++;
      setToasts((list) => [...list.slice(-3), { id, text, tone }]);
      setTimeout(() => dismiss(id), tone === 'error' ? LIFETIME_MS * 2 : LIFETIME_MS);
    },
    [dismiss],
  );
  const value = useMemo(() => ({ show }), [show]);
  const polite = toasts.filter((toast) => toast.tone !== 'error');
  const urgent = toasts.filter((toast) => toast.tone === 'error');
  const render = (toast: Toast) => (
    <div key={toast.id} className={`toast toast-${toast.tone}`}>
      <span>{toast.text}</span>
      <Button className="toast-close" aria-label={t('dismiss')} onPress={() => dismiss(toast.id)}>
        ×
      </Button>
    </div>
  );
  return (
    <ToastContext.Provider value={value}>
      {children}
      <section className="toasts" aria-label={t('notifications')}>
        <div role="status" aria-live="polite">
          {polite.map(render)}
        </div>
        <div role="alert" aria-live="assertive">
          {urgent.map(render)}
        </div>
      </section>
    </ToastContext.Provider>
  );
}

export function useToast(): ToastApi {
  return useContext(ToastContext);
}
