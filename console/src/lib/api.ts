// The console's one way to the service: the same /api/v1 endpoints as integrations, with the
// session cookie in place of a key (decisions §14).

/** The S2 error body: `{error, message?, details?}`. */
export interface ErrorBody {
  error: string;
  message?: string;
  details?: unknown;
}

/** A refused or failed call, with the S2 error code and the HTTP status. */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly details: unknown;
  /** Seconds to wait, from `Retry-After` (429). */
  readonly retryAfter: number | null;
  /** The whole error body, for members beside `error` (e.g. a refused return's `reason`). */
  readonly body: ErrorBody & Record<string, unknown>;

  constructor(status: number, body: ErrorBody, retryAfter: number | null = null) {
    super(body.message ?? body.error);
    this.name = 'ApiError';
    this.status = status;
    this.code = body.error;
    this.details = body.details;
    this.retryAfter = retryAfter;
    this.body = body as ErrorBody & Record<string, unknown>;
  }
}

/** `{key, reason}` items of a validation error's details, when it has them. */
export function fieldErrors(error: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (!(error instanceof ApiError) || !Array.isArray(error.details)) return out;
  for (const item of error.details as Array<Record<string, unknown>>) {
    const key = typeof item.key === 'string' ? item.key : typeof item.field === 'string' ? item.field : null;
    if (key === null) continue;
    out[key] = typeof item.message === 'string' ? item.message : String(item.reason ?? 'invalid');
  }
  return out;
}

let csrfToken: string | null = null;
let onUnauthorized: (() => void) | null = null;

/** The session's CSRF token, sent as `X-CSRF-Token` on every state-changing call. */
export function setCsrfToken(token: string | null): void {
  csrfToken = token;
}

/** What a 401 from an ordinary call does (the session ended): the session context signs out. */
export function setUnauthorizedHandler(handler: (() => void) | null): void {
  onUnauthorized = handler;
}

type Query = Record<string, string | number | boolean | null | undefined | readonly string[]>;

export function withQuery(path: string, query: Query = {}): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value === undefined || value === null || value === '') continue;
    if (Array.isArray(value)) for (const item of value) params.append(key, item);
    else params.set(key, String(value));
  }
  const text = params.toString();
  return text === '' ? path : `${path}?${text}`;
}

export interface RequestOptions {
  method?: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  body?: unknown;
  query?: Query;
  signal?: AbortSignal;
  /** A 401 is the answer itself (sign-in, session check), not the end of the session. */
  allowUnauthorized?: boolean;
}

const STATE_CHANGING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

export async function api<T>(path: string, options: RequestOptions = {}): Promise<T> {
  const method = options.method ?? 'GET';
  const headers: Record<string, string> = { accept: 'application/json' };
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  if (STATE_CHANGING.has(method) && csrfToken !== null) headers['x-csrf-token'] = csrfToken;
  let response: Response;
  try {
    response = await fetch(withQuery(path, options.query), {
      method,
      headers,
      credentials: 'same-origin',
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
      signal: options.signal,
    });
  } catch (error) {
    if ((error as Error).name === 'AbortError') throw error;
    throw new ApiError(0, { error: 'network_error', message: (error as Error).message });
  }
  if (response.status === 204) return undefined as T;
  const text = await response.text();
  let body: unknown = null;
  try {
    body = text === '' ? null : JSON.parse(text);
  } catch {
    body = null;
  }
  if (response.ok) return body as T;
  const errorBody: ErrorBody =
    body !== null && typeof body === 'object' && typeof (body as ErrorBody).error === 'string'
      ? (body as ErrorBody)
      : { error: `http_${response.status}` };
  const retry = Number(response.headers.get('retry-after'));
  const error = new ApiError(response.status, errorBody, Number.isFinite(retry) && retry > 0 ? retry : null);
  if (response.status === 401 && !options.allowUnauthorized) onUnauthorized?.();
  throw error;
}
