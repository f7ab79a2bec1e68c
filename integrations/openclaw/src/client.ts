// The HTTP client of `skald serve`: one JSON request with the skald key, retried with backoff
// while skald is unreachable or answers 5xx/429, within one deadline. A 4xx other than 429 is
// skald saying the request is wrong: it is never retried.

/** The plugin's settings, from `plugins.entries.skald.config` in openclaw.json. */
export interface SkaldConfig {
  /** Base URL of `skald serve`, without a trailing slash. */
  url: string;
  /** The skald key (`sk-skald-…`), read from the environment variable the config names. */
  apiKey: string | undefined;
  /** Whether turns use long-term memory (recall, profile, the memory tools). */
  memory: boolean;
  /** Deadline of one request, retries included. */
  timeoutMs: number;
  /** Where commits wait while skald cannot take them. */
  spoolDir: string | undefined;
}

export const DEFAULT_URL = "http://127.0.0.1:7420";
export const DEFAULT_KEY_ENV = "SKALD_API_KEY";
export const DEFAULT_TIMEOUT_MS = 30_000;

/** Reads and checks the plugin's config; a wrong field is an error that names it. */
export function parseConfig(
  raw: Record<string, unknown> | undefined,
  env: Record<string, string | undefined>,
  agentDir: string | undefined,
): SkaldConfig {
  const config = raw ?? {};
  const known = new Set(["url", "apiKeyEnv", "memory", "timeoutMs", "spoolDir"]);
  for (const key of Object.keys(config)) {
    if (!known.has(key)) {
      throw new Error(
        `skald plugin config: unknown field ${JSON.stringify(key)}; expected one of ${[...known].join(", ")}`,
      );
    }
  }
  const url = optional(config, "url", "string") ?? DEFAULT_URL;
  try {
    const parsed = new URL(url);
    if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
      throw new Error("not http(s)");
    }
  } catch {
    throw new Error(`skald plugin config: url ${JSON.stringify(url)} is not an http(s) URL`);
  }
  const keyEnv = optional(config, "apiKeyEnv", "string") ?? DEFAULT_KEY_ENV;
  const timeoutMs = optional(config, "timeoutMs", "number") ?? DEFAULT_TIMEOUT_MS;
  if (!Number.isInteger(timeoutMs) || timeoutMs < 100) {
    throw new Error(`skald plugin config: timeoutMs must be an integer of at least 100, found ${timeoutMs}`);
  }
  const spoolDir =
    optional(config, "spoolDir", "string") ?? (agentDir ? `${agentDir}/skald-spool` : undefined);
  const apiKey = env[keyEnv];
  return {
    url: url.replace(/\/+$/, ""),
    apiKey: apiKey && apiKey.length > 0 ? apiKey : undefined,
    memory: optional(config, "memory", "boolean") ?? true,
    timeoutMs,
    spoolDir,
  };
}

function optional<T extends "string" | "number" | "boolean">(
  config: Record<string, unknown>,
  key: string,
  type: T,
): (T extends "string" ? string : T extends "number" ? number : boolean) | undefined {
  const value = config[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== type) {
    throw new Error(`skald plugin config: ${key} must be a ${type}, found ${JSON.stringify(value)}`);
  }
  return value as never;
}

/** Why a request to skald failed. */
export class SkaldError extends Error {
  constructor(
    message: string,
    /** The HTTP status, when skald answered. */
    readonly status: number | undefined,
    /** Whether trying again later can succeed (skald unreachable, 5xx, 429). */
    readonly retryable: boolean,
  ) {
    super(message);
    this.name = "SkaldError";
  }
}

export type FetchLike = (input: string, init: RequestInit) => Promise<Response>;

/** How long skald counts as down after a request found it unreachable: calls fail at once
 * meanwhile instead of each waiting out its deadline, so a turn with skald down costs one
 * deadline, not one per lifecycle call. */
export const DOWN_FOR_MS = 15_000;

/** One `skald serve`. */
export class SkaldClient {
  /** Until when skald counts as down (see `DOWN_FOR_MS`). */
  private downUntil = 0;

  constructor(
    readonly config: SkaldConfig,
    private readonly fetchImpl: FetchLike = (input, init) => fetch(input, init),
    private readonly now: () => number = Date.now,
  ) {}

  /** `POST path` with a JSON body; the answer's JSON. */
  post<T>(path: string, body: unknown, timeoutMs?: number): Promise<T> {
    return this.request<T>("POST", path, body, timeoutMs);
  }

  /** `GET path`; the answer's JSON. */
  get<T>(path: string, timeoutMs?: number): Promise<T> {
    return this.request<T>("GET", path, undefined, timeoutMs);
  }

  private async request<T>(
    method: string,
    path: string,
    body: unknown,
    timeoutMs = this.config.timeoutMs,
  ): Promise<T> {
    if (this.now() < this.downUntil) {
      throw new SkaldError(
        `skald ${method} ${path}: ${this.config.url} was unreachable moments ago; not waiting again yet`,
        undefined,
        true,
      );
    }
    try {
      return await this.attempt<T>(method, path, body, timeoutMs);
    } catch (error) {
      if (error instanceof SkaldError && error.retryable && error.status === undefined) {
        this.downUntil = this.now() + DOWN_FOR_MS;
      }
      throw error;
    }
  }

  private async attempt<T>(method: string, path: string, body: unknown, timeoutMs: number): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    const headers: Record<string, string> = { accept: "application/json" };
    if (body !== undefined) headers["content-type"] = "application/json";
    if (this.config.apiKey) headers["x-skald-key"] = this.config.apiKey;
    const payload = body === undefined ? undefined : JSON.stringify(body);
    let attempt = 0;
    let lastError: SkaldError | undefined;
    for (;;) {
      const remaining = deadline - Date.now();
      if (remaining <= 0) {
        throw lastError ?? new SkaldError(`${method} ${path}: no time left`, undefined, true);
      }
      try {
        const init: RequestInit = { method, headers, signal: AbortSignal.timeout(remaining) };
        if (payload !== undefined) init.body = payload;
        const response = await this.fetchImpl(`${this.config.url}${path}`, init);
        const text = await response.text();
        if (response.ok) {
          return (text.length > 0 ? JSON.parse(text) : {}) as T;
        }
        const retryable = response.status >= 500 || response.status === 429;
        lastError = new SkaldError(
          `skald ${method} ${path}: ${response.status} ${errorMessage(text)}`,
          response.status,
          retryable,
        );
        if (!retryable) throw lastError;
      } catch (error) {
        if (error instanceof SkaldError && !error.retryable) throw error;
        if (!(error instanceof SkaldError)) {
          lastError = new SkaldError(
            `skald ${method} ${path}: cannot reach ${this.config.url}: ${describe(error)}`,
            undefined,
            true,
          );
        }
      }
      attempt += 1;
      const pause = Math.min(100 * 2 ** attempt, 2_000, Math.max(0, deadline - Date.now()));
      await new Promise((resolve) => setTimeout(resolve, pause));
    }
  }
}

/** skald's `{"error": {"message": …}}`, or the body as it came. */
function errorMessage(text: string): string {
  try {
    const parsed = JSON.parse(text) as { error?: { message?: unknown } };
    if (typeof parsed.error?.message === "string") return parsed.error.message;
  } catch {
    // Not JSON: the text itself says what happened.
  }
  return text.slice(0, 500);
}

function describe(error: unknown): string {
  if (error instanceof Error) {
    const cause = (error as { cause?: unknown }).cause;
    return cause instanceof Error ? `${error.message} (${cause.message})` : error.message;
  }
  return String(error);
}
