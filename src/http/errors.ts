/**
 * The closed list of error codes the service answers with, and their HTTP statuses. Every error
 * a client sees comes from here, through AppError and the one error handler (http/error-handler.ts).
 */
export const ERROR_STATUS = {
  unauthorized: 401,
  invalid_credentials: 401,
  forbidden: 403,
  module_not_enabled: 403,
  origin_not_allowed: 403,
  csrf_failed: 403,
  not_found: 404,
  unknown_endpoint: 404,
  unknown_entity: 404,
  record_not_found: 404,
  no_distribution: 404,
  invalid_body: 400,
  invalid_request: 400,
  invalid_idempotency_key: 400,
  method_not_allowed: 405,
  conflict: 409,
  ambiguous_match: 409,
  name_taken: 409,
  partner_name_taken: 409,
  return_reason_taken: 409,
  idempotency_key_in_use: 409,
  return_not_allowed: 409,
  slot_taken: 409,
  already_booked: 409,
  last_owner: 409,
  token_expired: 410,
  payload_too_large: 413,
  unsupported_media_type: 415,
  validation_failed: 422,
  idempotency_key_reused: 422,
  rate_limited: 429,
  internal_error: 500,
  service_unavailable: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;
export const ERROR_CODES = Object.keys(ERROR_STATUS) as ErrorCode[];

/** One item of a 422 `validation_failed` answer (decisions §3). */
export interface ValidationDetail {
  key: string;
  reason: string;
  message: string;
}

export interface AppErrorOptions {
  /** Human-readable text; S1 answers show it as `message`. */
  message?: string;
  /** Extra top-level members of the S2 body, e.g. `ids` for an ambiguous match. */
  extra?: Record<string, unknown>;
  details?: ValidationDetail[];
  /** Response headers to add, e.g. Retry-After. */
  headers?: Record<string, string>;
  cause?: unknown;
  /** Set only by moduleNotEnabledInSetting: every other code answers its own status. */
  status?: 422;
}

/**
 * A module a setting needs is not booked (decisions §7: a `distribute` automation without the
 * distribution module is "refused with 422 `module_not_enabled`"): the code names the refusal,
 * the status is the 422 of a refused setting (the endpoint itself is open: 403 would say the
 * endpoint is the module's), and the details name the setting's key.
 */
export function moduleNotEnabledInSetting(details: ValidationDetail[]): AppError {
  return new AppError('module_not_enabled', { details, status: 422 });
}

const DEFAULT_MESSAGES: Partial<Record<ErrorCode, string>> = {
  unauthorized: 'Missing or invalid credentials',
  forbidden: 'The credential lacks the permission for this action',
  module_not_enabled: 'This endpoint belongs to a module the account has not booked',
  origin_not_allowed: 'The page this form was sent from may not post to this source',
  invalid_credentials: 'The email address or the password is wrong, or the sign-in link is not valid',
  csrf_failed: 'The request lacks the X-CSRF-Token of its session',
  last_owner: 'An account keeps at least one owner',
  not_found: 'Not found',
  unknown_endpoint: 'No route at that address',
  invalid_body: 'The body is not valid for its content type',
  validation_failed: 'The request has invalid values',
  rate_limited: 'Too many requests',
  internal_error: 'Internal error',
  service_unavailable: 'The service is temporarily unavailable',
  payload_too_large: 'The request body is too large',
  unsupported_media_type: 'Unsupported content type',
};

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly extra: Record<string, unknown> | undefined;
  readonly details: ValidationDetail[] | undefined;
  readonly headers: Record<string, string> | undefined;

  constructor(code: ErrorCode, options: AppErrorOptions = {}) {
    super(options.message ?? DEFAULT_MESSAGES[code] ?? code.replaceAll('_', ' '), { cause: options.cause });
    this.name = 'AppError';
    this.code = code;
    this.status = options.status ?? ERROR_STATUS[code];
    this.extra = options.extra;
    this.details = options.details;
    this.headers = options.headers;
  }
}

export function validationFailed(details: ValidationDetail[]): AppError {
  return new AppError('validation_failed', { details });
}

/** Decisions §4: a key outside 1–255 printable characters is 400, wherever it was sent. */
export function idempotencyKeyRefused(): AppError {
  return new AppError('invalid_idempotency_key', {
    message: 'An idempotency key is 1 to 255 printable characters',
  });
}

export function notFound(what = 'Not found'): AppError {
  return new AppError('not_found', { message: what });
}
