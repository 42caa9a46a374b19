/**
 * One namespace of a memory served by `partner-memory serve`, with the methods
 * of the Python `MemoryClient` in camelCase. Answers are the service's JSON
 * documents, typed from its OpenAPI schema (`schema.ts`); failures are the
 * error classes of `errors.ts`.
 */
import {
  errorOf,
  InvalidInputError,
  NotFoundError,
  ConflictError,
  PartnerMemoryError,
  StorageUnavailableError,
} from "./errors.js";
import type { components } from "./schema.js";

/** The service's documents, by the names its schema gives them. */
export type Schemas = components["schemas"];
export type TurnDoc = Schemas["TurnDoc"];
export type MessagesDoc = Schemas["MessagesDoc"];
export type RollDoc = Schemas["RollDoc"];
export type SessionDoc = Schemas["SessionDoc"];
export type WindowDoc = Schemas["WindowDoc"];
export type ContextDoc = Schemas["ContextDoc"];
export type RecallDoc = Schemas["RecallDoc"];
export type UnitsDoc = Schemas["UnitsDoc"];
export type UnitDoc = Schemas["UnitDoc"];
export type SliceDoc = Schemas["SliceDoc"];
export type RollingsDoc = Schemas["RollingsDoc"];
export type TopicsDoc = Schemas["TopicsDoc"];
export type StatsDoc = Schemas["StatsDoc"];
export type NamespaceOut = Schemas["NamespaceOut"];
export type NamespacesDoc = Schemas["NamespacesDoc"];
export type StatusDoc = Schemas["StatusDoc"];
export type Domain = Schemas["Domain"];
/** A message to record as it is (`recordMessages`). */
export type MessageIn = Schemas["MessageIn"];

/** The namespace a client uses when none is named, as in Python. */
export const DEFAULT_NAMESPACE = "default";
/** How long a request may take unless the client is told otherwise (ms). */
export const DEFAULT_TIMEOUT_MS = 30_000;

export interface ClientOptions {
  /** The service's address, e.g. "http://127.0.0.1:8000". */
  url: string;
  /** Whose memory: one agent, or one user of an agent ("default"). */
  namespace?: string;
  /** An API key (`partner-memory keys create`), sent as a bearer token. */
  key?: string;
  /** The fetch to use (the platform's by default). */
  fetch?: typeof fetch;
  /** How long a request may take before it fails with StorageUnavailableError (ms). */
  timeoutMs?: number;
}

/** What every call takes: a signal to abandon it. */
export interface CallOptions {
  signal?: AbortSignal;
}

/** One exchange to record: the user's words (as `source`) and the agent's answer. */
export interface TurnInput {
  userInput: string;
  assistantOutput: string;
  /** Who spoke (the R11 marker line): "USER" unless said. */
  source?: string;
  /** When (ms since 1970 UTC); now if left out. */
  timestamp?: number | null;
  /** Kept with the user's message. */
  metadata?: Record<string, unknown> | null;
}

export type TurnOptions = Omit<TurnInput, "userInput" | "assistantOutput">;

/** A recall's question beyond its text: how many, when, about what, kept to what. */
export type RecallOptions = Partial<Omit<Schemas["RecallIn"], "query">>;
/** A recall's question as one value. */
export type RecallQuery = Schemas["RecallIn"] | ({ query: string } & RecallOptions);

/** What to forget: messages by id, a slice, a unit, or the whole namespace. */
export type ForgetRequest =
  | { target: "messages"; messageIds: string[] }
  | { target: "slice"; unitId: string; sliceId: string }
  | { target: "unit"; unitId: string }
  | { target: "namespace" };

interface Request {
  method: "GET" | "POST" | "DELETE";
  path: string;
  body?: unknown;
  query?: Record<string, string | number | boolean | string[] | null | undefined>;
  accept?: string;
  signal?: AbortSignal | undefined;
}

export class MemoryClient {
  readonly namespace: string;
  readonly #url: string;
  readonly #key: string | undefined;
  readonly #fetch: typeof fetch;
  readonly #timeoutMs: number;
  readonly #prefix: string;

  constructor(options: ClientOptions) {
    if (!options.url) throw new InvalidInputError("url is required: the service's address");
    const namespace = options.namespace ?? DEFAULT_NAMESPACE;
    if (!namespace.trim()) throw new InvalidInputError("namespace must not be blank");
    const timeout = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (!(timeout > 0)) throw new InvalidInputError(`timeoutMs must be positive, got ${timeout}`);
    this.namespace = namespace;
    this.#url = options.url.replace(/\/+$/, "");
    this.#key = options.key;
    this.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.#timeoutMs = timeout;
    this.#prefix = `/v1/namespaces/${encodeURIComponent(namespace)}`;
  }

  /** The same service and key, another namespace. */
  withNamespace(namespace: string): MemoryClient {
    return new MemoryClient({
      url: this.#url,
      namespace,
      key: this.#key,
      fetch: this.#fetch,
      timeoutMs: this.#timeoutMs,
    });
  }

  // -- writing ----------------------------------------------------------------------

  /** Record one exchange (creating the namespace); a rolling may start behind it. */
  recordTurn(
    userInput: string,
    assistantOutput: string,
    options: TurnOptions & CallOptions = {},
  ): Promise<TurnDoc> {
    const { signal, ...turn } = options;
    return this.record({ userInput, assistantOutput, ...turn }, { signal });
  }

  /** `recordTurn` with the exchange as a value. */
  record(turn: TurnInput, call: CallOptions = {}): Promise<TurnDoc> {
    const body = {
      user_input: turn.userInput,
      assistant_output: turn.assistantOutput,
      source: turn.source ?? "USER",
      timestamp: turn.timestamp ?? null,
      metadata: turn.metadata ?? {},
    };
    return this.#json({ method: "POST", path: `${this.#prefix}/turns`, body, ...call });
  }

  /** Record messages as they are (roles, ids, times, metadata). */
  recordMessages(
    messages: MessageIn[],
    options: { interaction?: number | null } & CallOptions = {},
  ): Promise<MessagesDoc> {
    const body = { messages, interaction: options.interaction ?? null };
    return this.#json({
      method: "POST",
      path: `${this.#prefix}/messages`,
      body,
      signal: options.signal,
    });
  }

  /** Roll now; `rolled` is false when there was too little to roll. `idle` rolls all of
   * the window and starts a new session; `through` rolls up to that message id. */
  rollNow(options: { idle?: boolean; through?: string } & CallOptions = {}): Promise<RollDoc> {
    const query = { idle: options.idle ?? false, through: options.through };
    return this.#json({ method: "POST", path: `${this.#prefix}/roll`, query, signal: options.signal });
  }

  /** Start a new memory session: the next rolling opens a new unit. */
  endSession(call: CallOptions = {}): Promise<SessionDoc> {
    return this.#json({ method: "POST", path: `${this.#prefix}/session/end`, ...call });
  }

  // -- reading ----------------------------------------------------------------------

  /** The messages not rolled yet, oldest first. */
  window(call: CallOptions = {}): Promise<WindowDoc> {
    return this.#json({ method: "GET", path: `${this.#prefix}/window`, ...call });
  }

  /** The context's blocks as the agent receives them (domains: most wanted first). */
  context(options: { domains?: Domain[] } & CallOptions = {}): Promise<ContextDoc> {
    return this.#json({
      method: "GET",
      path: `${this.#prefix}/context`,
      query: { format: "json", domain: options.domains },
      signal: options.signal,
    });
  }

  /** The context as the XML placed in an agent's prompt. */
  async contextXml(options: { domains?: Domain[] } & CallOptions = {}): Promise<string> {
    return this.#send({
      method: "GET",
      path: `${this.#prefix}/context`,
      query: { format: "xml", domain: options.domains },
      accept: "application/xml",
      signal: options.signal,
    });
  }

  /** The messages that best match the query, with the slices that hold them. */
  recall(query: string | RecallQuery, options: RecallOptions & CallOptions = {}): Promise<RecallDoc> {
    const { signal, ...asked } = options;
    const body = typeof query === "string" ? { query, ...asked } : { ...query, ...asked };
    if (!body.query || !String(body.query).trim()) {
      return Promise.reject(new InvalidInputError("query must not be blank"));
    }
    return this.#json({ method: "POST", path: `${this.#prefix}/recall`, body, signal });
  }

  /** Units newest first, paged; `since`/`until` (ms) bound their times. */
  units(
    options: { limit?: number; offset?: number; after?: string; since?: number; until?: number } & CallOptions = {},
  ): Promise<UnitsDoc> {
    const { signal, ...query } = options;
    return this.#json({ method: "GET", path: `${this.#prefix}/units`, query, signal });
  }

  /** A unit and its slices (with `messages`, its messages too); an id prefix will do. */
  unit(unitId: string, options: { messages?: boolean } & CallOptions = {}): Promise<UnitDoc> {
    return this.#json({
      method: "GET",
      path: this.#unitPath(unitId),
      query: { messages: options.messages ?? false },
      signal: options.signal,
    });
  }

  /** A slice, the messages it covers and where each summary sentence came from. */
  readSlice(unitId: string, sliceId: string, call: CallOptions = {}): Promise<SliceDoc> {
    return this.#json({ method: "GET", path: this.#slicePath(unitId, sliceId), ...call });
  }

  /** The rolling log after sequence number `after`, oldest first. */
  rollings(options: { after?: number; limit?: number } & CallOptions = {}): Promise<RollingsDoc> {
    const { signal, ...query } = options;
    return this.#json({ method: "GET", path: `${this.#prefix}/rollings`, query, signal });
  }

  /** The topic paths the namespace's slices were filed under, most used first. */
  topics(options: { limit?: number } & CallOptions = {}): Promise<TopicsDoc> {
    const { signal, ...query } = options;
    return this.#json({ method: "GET", path: `${this.#prefix}/topics`, query, signal });
  }

  /** Units and the totals over every rolling. */
  stats(call: CallOptions = {}): Promise<StatsDoc> {
    return this.#json({ method: "GET", path: `${this.#prefix}/stats`, ...call });
  }

  // -- forgetting -------------------------------------------------------------------

  /** Carry out a forget: the number of messages forgotten (0 for a unit or the
   * namespace). Forgetting the namespace leaves it going on empty, as in Python. */
  async forget(request: ForgetRequest, call: CallOptions = {}): Promise<number> {
    switch (request.target) {
      case "messages": {
        const body = { message_ids: request.messageIds };
        const path = `${this.#prefix}/forget/messages`;
        const done = await this.#json<{ message_count: number }>({ method: "POST", path, body, ...call });
        return done.message_count;
      }
      case "slice": {
        const path = this.#slicePath(request.unitId, request.sliceId);
        const done = await this.#json<{ message_count: number }>({ method: "DELETE", path, ...call });
        return done.message_count;
      }
      case "unit":
        await this.#json({ method: "DELETE", path: this.#unitPath(request.unitId), ...call });
        return 0;
      case "namespace":
        await this.#quietly(NotFoundError, { method: "DELETE", path: this.#prefix, ...call });
        await this.ensureNamespace(call);
        return 0;
      default:
        throw new InvalidInputError(`unknown forget target ${JSON.stringify(request)}`);
    }
  }

  forgetMessages(messageIds: string[], call: CallOptions = {}): Promise<number> {
    return this.forget({ target: "messages", messageIds }, call);
  }

  forgetSlice(unitId: string, sliceId: string, call: CallOptions = {}): Promise<number> {
    return this.forget({ target: "slice", unitId, sliceId }, call);
  }

  async forgetUnit(unitId: string, call: CallOptions = {}): Promise<void> {
    await this.forget({ target: "unit", unitId }, call);
  }

  /** Forget the namespace and everything in it; it goes on empty. */
  async forgetAll(call: CallOptions = {}): Promise<void> {
    await this.forget({ target: "namespace" }, call);
  }

  // -- namespaces and the service ---------------------------------------------------

  /** Create this client's namespace (ConflictError if it exists). */
  createNamespace(call: CallOptions = {}): Promise<NamespaceOut> {
    const body = { namespace: this.namespace };
    return this.#json({ method: "POST", path: "/v1/namespaces", body, ...call });
  }

  /** Create this client's namespace unless it exists (a chat's first context read needs it). */
  async ensureNamespace(call: CallOptions = {}): Promise<void> {
    await this.#quietly(ConflictError, {
      method: "POST",
      path: "/v1/namespaces",
      body: { namespace: this.namespace },
      ...call,
    });
  }

  /** Namespaces by name (those the key may read), paged by `after`. */
  namespaces(options: { limit?: number; after?: string } & CallOptions = {}): Promise<NamespacesDoc> {
    const { signal, ...query } = options;
    return this.#json({ method: "GET", path: "/v1/namespaces", query, signal });
  }

  /** Whether the service and its database answer (`/readyz`). */
  async ready(call: CallOptions = {}): Promise<boolean> {
    try {
      return (await this.#json<StatusDoc>({ method: "GET", path: "/readyz", ...call })).status === "ready";
    } catch (error) {
      if (error instanceof StorageUnavailableError) return false;
      throw error;
    }
  }

  // -- the wire -----------------------------------------------------------------------

  #unitPath(unitId: string): string {
    return `${this.#prefix}/units/${encodeURIComponent(unitId)}`;
  }

  #slicePath(unitId: string, sliceId: string): string {
    return `${this.#unitPath(unitId)}/slices/${encodeURIComponent(sliceId)}`;
  }

  async #json<T>(request: Request): Promise<T> {
    return JSON.parse(await this.#send(request)) as T;
  }

  async #quietly(kind: typeof PartnerMemoryError, request: Request): Promise<void> {
    try {
      await this.#send(request);
    } catch (error) {
      if (!(error instanceof kind)) throw error;
    }
  }

  /** The answer's text, or the error it stands for. */
  async #send(request: Request): Promise<string> {
    const url = new URL(this.#url + request.path);
    for (const [name, value] of Object.entries(request.query ?? {})) {
      if (value === undefined || value === null) continue;
      for (const one of Array.isArray(value) ? value : [value]) {
        url.searchParams.append(name, String(one));
      }
    }
    const headers: Record<string, string> = { Accept: request.accept ?? "application/json" };
    if (this.#key) headers.Authorization = `Bearer ${this.#key}`;
    if (request.body !== undefined) headers["Content-Type"] = "application/json";
    const timeout = AbortSignal.timeout(this.#timeoutMs);
    const signal = request.signal ? AbortSignal.any([request.signal, timeout]) : timeout;
    let status: number;
    let text: string;
    try {
      const response = await this.#fetch(url, {
        method: request.method,
        headers,
        body: request.body === undefined ? null : JSON.stringify(request.body),
        signal,
      });
      status = response.status;
      text = await response.text();
    } catch (error) {
      if (request.signal?.aborted) throw request.signal.reason; // the caller's own choice
      if (timeout.aborted) {
        throw new StorageUnavailableError(`no answer from the memory service within ${this.#timeoutMs} ms`);
      }
      throw new StorageUnavailableError(`memory service unreachable: ${(error as Error).message}`);
    }
    if (status >= 400) throw errorOf(status, text);
    return text;
  }
}
