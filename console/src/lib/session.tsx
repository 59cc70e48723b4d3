// The signed-in person (decisions §14): who, which role, the CSRF token, and the account's modules.
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { createContext, type ReactNode, useCallback, useContext, useEffect, useMemo } from 'react';
import { Navigate, useLocation } from 'react-router';
import { ApiError, api, setCsrfToken, setUnauthorizedHandler } from './api.ts';

export const ROLES = ['owner', 'admin', 'member', 'viewer'] as const;
export type Role = (typeof ROLES)[number];

export interface SessionUser {
  id: string;
  email: string;
  name: string;
  role: Role;
  account_id: string;
  /** False until the person sets a password (signed in by a link). */
  has_password?: boolean;
}

export interface SessionBody {
  user: SessionUser;
  csrf_token: string;
}

/** What a role may change (reading is everyone's). Mirrors the service's rules in §14. */
export type Capability =
  | 'records:write'
  | 'notes:write'
  | 'stages:write'
  | 'returns:write'
  | 'settings'
  | 'users';

const MEMBER: Capability[] = ['records:write', 'notes:write', 'stages:write', 'returns:write'];
const ROLE_CAPABILITIES: Record<Role, readonly Capability[]> = {
  viewer: [],
  member: MEMBER,
  admin: [...MEMBER, 'settings'],
  owner: [...MEMBER, 'settings', 'users'],
};

export function roleCan(role: Role | undefined, capability: Capability): boolean {
  return role !== undefined && ROLE_CAPABILITIES[role].includes(capability);
}

export const SESSION_KEY = ['session'] as const;
export const MODULES_KEY = ['modules'] as const;

interface SessionState {
  user: SessionUser;
  /** Modules the account has booked (`crm`, `distribution`, `booking`). */
  modules: readonly string[];
  can(capability: Capability): boolean;
  hasModule(module: string): boolean;
  signOut(): Promise<void>;
}

const SessionContext = createContext<SessionState | null>(null);

/** Reads the session; `null` when nobody is signed in. */
export async function fetchSession(): Promise<SessionBody | null> {
  try {
    const body = await api<SessionBody>('/api/v1/session', { allowUnauthorized: true });
    setCsrfToken(body.csrf_token);
    return body;
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) {
      setCsrfToken(null);
      return null;
    }
    throw error;
  }
}

export function useSessionQuery() {
  return useQuery({ queryKey: SESSION_KEY, queryFn: fetchSession, staleTime: 60_000, retry: false });
}

/** Stores a fresh session (after signing in) so that the console opens at once. */
export function useAcceptSession() {
  const client = useQueryClient();
  return useCallback(
    (body: SessionBody) => {
      setCsrfToken(body.csrf_token);
      client.setQueryData(SESSION_KEY, body);
    },
    [client],
  );
}

/** Wraps the signed-in part of the console; without a session it leads to the sign-in page. */
export function RequireSession({ children, fallback }: { children: ReactNode; fallback: ReactNode }) {
  const client = useQueryClient();
  const location = useLocation();
  const session = useSessionQuery();
  const user = session.data?.user;
  const modules = useQuery({
    queryKey: [...MODULES_KEY, user?.account_id],
    queryFn: () => api<{ modules: string[] }>('/api/v1/entities').then((body) => body.modules),
    enabled: user !== undefined,
    staleTime: 5 * 60_000,
  });

  useEffect(() => {
    // A 401 from any call means the session ended (signed out elsewhere, revoked): read it again.
    setUnauthorizedHandler(() => {
      client.setQueryData(SESSION_KEY, null);
    });
    return () => setUnauthorizedHandler(null);
  }, [client]);

  const signOut = useCallback(async () => {
    try {
      await api('/api/v1/session', { method: 'DELETE', allowUnauthorized: true });
    } finally {
      setCsrfToken(null);
      client.clear();
      client.setQueryData(SESSION_KEY, null);
    }
  }, [client]);

  const state = useMemo<SessionState | null>(() => {
    if (!user) return null;
    const list = modules.data ?? [];
    return {
      user,
      modules: list,
      can: (capability) => roleCan(user.role, capability),
      hasModule: (module) => list.includes(module),
      signOut,
    };
  }, [user, modules.data, signOut]);

  if (session.isPending || (user && modules.isPending)) return <>{fallback}</>;
  if (session.isError) throw session.error;
  if (!state) {
    const next = location.pathname + location.search;
    return <Navigate to={next === '/' ? '/login' : `/login?next=${encodeURIComponent(next)}`} replace />;
  }
  return <SessionContext.Provider value={state}>{children}</SessionContext.Provider>;
}

export function useSession(): SessionState {
  const state = useContext(SessionContext);
  if (!state) throw new Error('useSession outside RequireSession');
  return state;
}
