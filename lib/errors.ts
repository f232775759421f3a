/** Typed errors thrown by domain code; each transport renders them in one place. */
export type ErrorCode =
  | 'UNAUTHORIZED'
  | 'FORBIDDEN'
  | 'NOT_FOUND'
  | 'VALIDATION_ERROR'
  | 'CONFLICT'
  | 'PAYLOAD_TOO_LARGE'
  | 'UNSUPPORTED_MEDIA_TYPE'
  | 'METHOD_NOT_ALLOWED'
  | 'RATE_LIMITED'
  | 'QUOTA_EXCEEDED'
  | 'PLAN_LIMIT_REACHED'
  | 'ALREADY_ACKNOWLEDGED'
  | 'ALREADY_CLEARED'
  | 'SERVICE_UNAVAILABLE'
  | 'INTERNAL_ERROR';

export interface ErrorBody {
  error: string;
  code: ErrorCode;
  details?: unknown;
}

export class AppError extends Error {
  constructor(
    readonly status: number,
    readonly code: ErrorCode,
    message: string,
    readonly details?: unknown,
    /** Extra response headers, e.g. Retry-After. */
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'AppError';
  }

  toBody(): ErrorBody {
    return this.details === undefined
      ? { error: this.message, code: this.code }
      : { error: this.message, code: this.code, details: this.details };
  }
}

export interface FieldProblem {
  field: string;
  message: string;
}

export const unauthorized = (message = 'missing or invalid API key') => new AppError(401, 'UNAUTHORIZED', message);
export const forbidden = (message: string) => new AppError(403, 'FORBIDDEN', message);
export const notFound = (what: string) => new AppError(404, 'NOT_FOUND', `${what} not found`);
export const validation = (message: string, details: FieldProblem[]) => new AppError(400, 'VALIDATION_ERROR', message, details);
export const conflict = (code: ErrorCode, message: string, details?: unknown) => new AppError(409, code, message, details);
export const unavailable = (message: string, retryAfterSeconds: number) =>
  new AppError(503, 'SERVICE_UNAVAILABLE', message, undefined, { 'Retry-After': String(retryAfterSeconds) });
