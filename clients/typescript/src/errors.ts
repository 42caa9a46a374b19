/**
 * The service's errors as classes, in the families of the Python client's
 * (`partner_memory.errors`): catch `NotFoundError`, or `PartnerMemoryError` for any.
 */

/** One field a request got wrong (422), as the service names it. */
export interface FieldProblem {
  field: string;
  problem: string;
}

/** Any error the service answered with, or a failure to reach it. */
export class PartnerMemoryError extends Error {
  /** The HTTP status (0: no answer: the service was unreachable or too slow). */
  readonly status: number;
  /** The service's error code: invalid_input, refused, not_found, conflict, ... */
  readonly code: string;
  /** The fields a 422 names. */
  readonly fields: FieldProblem[];

  constructor(message: string, status = 0, code = "error", fields: FieldProblem[] = []) {
    super(message);
    this.name = new.target.name;
    this.status = status;
    this.code = code;
    this.fields = fields;
  }
}

/** A key was missing, unknown, revoked, or does not open this namespace for this (401, 403). */
export class AccessDeniedError extends PartnerMemoryError {}
/** No such namespace, unit, slice or message (404). */
export class NotFoundError extends PartnerMemoryError {}
/** It exists already, or changed meanwhile (409). */
export class ConflictError extends PartnerMemoryError {}
/** The request is wrong: a field, a size, a value (400, 406, 413, 422). */
export class InvalidInputError extends PartnerMemoryError {}
/** The service or its database cannot answer now (503), or no answer came in time. */
export class StorageUnavailableError extends PartnerMemoryError {}

const BY_STATUS: Record<number, typeof PartnerMemoryError> = {
  400: InvalidInputError,
  401: AccessDeniedError,
  403: AccessDeniedError,
  404: NotFoundError,
  406: InvalidInputError,
  409: ConflictError,
  413: InvalidInputError,
  422: InvalidInputError,
  503: StorageUnavailableError,
};

/** The error a failed answer stands for, read from the service's error envelope. */
export function errorOf(status: number, text: string): PartnerMemoryError {
  let code = "error";
  let message = text.slice(0, 500);
  let fields: FieldProblem[] = [];
  try {
    const body = JSON.parse(text) as { error?: { code?: string; message?: string; fields?: FieldProblem[] | null } };
    if (body.error) {
      code = body.error.code ?? code;
      message = body.error.message ?? message;
      fields = body.error.fields ?? [];
    }
  } catch {
    // not the envelope (a proxy's page): its text is the message
  }
  const Kind = BY_STATUS[status] ?? PartnerMemoryError;
  return new Kind(`${message} (HTTP ${status})`, status, code, fields);
}
