// skald as OpenClaw's `ContextEngine`: every lifecycle method is one request to `skald serve`'s
// engine API, which holds the session (fed by `commitTurn`), runs the pipeline and compaction,
// and answers with messages in the host's shapes.
//
// A context engine that throws gets quarantined for the whole process (OpenClaw falls back to
// its `legacy` engine), so no method here throws on skald's account: a commit skald cannot take
// now waits in the spool and goes first on the next call, an assemble that cannot reach skald
// answers with the host's own messages for that turn, a compaction reports `ok: false`.

import { createHash } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";

import type {
  AgentMessage,
  HarnessContextEngine as ContextEngine,
} from "openclaw/plugin-sdk/agent-harness-runtime";

import { SkaldClient, SkaldError } from "./client.js";
import { CommitSpool } from "./spool.js";

type Method<K extends keyof ContextEngine> = NonNullable<ContextEngine[K]> extends (
  params: infer P,
) => infer R
  ? { params: P; result: Awaited<R> }
  : never;

type AssembleParams = Method<"assemble">["params"];
type AssembleResult = Method<"assemble">["result"];
type CompactParams = Method<"compact">["params"];
type CompactResult = Method<"compact">["result"];
type CommitParams = Method<"commitTurn">["params"];
type BootstrapParams = Method<"bootstrap">["params"];
type MaintainParams = Method<"maintain">["params"];
type AfterTurnParams = Method<"afterTurn">["params"];
type SpawnParams = Method<"prepareSubagentSpawn">["params"];
type EndedParams = Method<"onSubagentEnded">["params"];
type RuntimeContext = NonNullable<AssembleParams["runtimeContext"]>;

/** The plugin's version, as `info.version` reports it. */
export const VERSION = "0.1.0";

/** Where the plugin's log lines go (OpenClaw's plugin logger). */
export interface Logger {
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

/** A session id skald accepts: `[A-Za-z0-9._:-]`, 1 to 128 characters. Other ids are hashed. */
export function skaldSessionId(hostSessionId: string): string {
  if (/^[A-Za-z0-9._:-]{1,128}$/.test(hostSessionId)) return hostSessionId;
  return `openclaw-${createHash("sha256").update(hostSessionId).digest("hex").slice(0, 40)}`;
}

/** What of OpenClaw's runtime context skald reads; functions and handles never leave. */
function runtimeContextForSkald(context: RuntimeContext | undefined): Record<string, unknown> | undefined {
  if (!context) return undefined;
  const out: Record<string, unknown> = {};
  if (typeof context.tokenBudget === "number") out.tokenBudget = context.tokenBudget;
  if (typeof context.currentTokenCount === "number") out.currentTokenCount = context.currentTokenCount;
  // The model's window, which OpenClaw passes beside the budget in commit and maintenance calls.
  if (typeof context.modelContextWindow === "number") out.modelContextWindow = context.modelContextWindow;
  if (context.promptCache) out.promptCache = JSON.parse(JSON.stringify(context.promptCache)) as unknown;
  return out;
}

/**
 * skald's compaction trigger for a `compact` OpenClaw makes: `overflow` when it recovers from a
 * provider that refused the request as too long (its runtime context's `trigger`, or the runtime
 * settings' `diagnostics.degradedReason` of `context_overflow`), so that skald accepts a degraded
 * summary rather than leave the session unable to go on; otherwise none, and `force` decides.
 */
export function compactionTrigger(params: CompactParams): "overflow" | undefined {
  if (params.runtimeContext?.trigger === "overflow") return "overflow";
  if (params.runtimeSettings?.diagnostics?.degradedReason === "context_overflow") return "overflow";
  return undefined;
}

/** The largest AGENTS.md sent to skald: a bigger file is not a rules file. */
const MAX_AGENTS_MD_BYTES = 256 * 1024;

/** What OpenClaw's `session_end` hook says of the ended session that skald reads. */
export interface SessionEndParams {
  sessionId: string;
  sessionKey?: string;
  /** `new`, `reset`, `idle`, `daily`, `compaction`, `deleted`, `shutdown`, `restart`, `unknown`. */
  reason?: string;
  nextSessionId?: string;
}

/** skald's end reason for OpenClaw's: `/new` and `reset` by name, every other end `ended`. */
export function endReason(reason: string | undefined): "new" | "reset" | "ended" {
  if (reason === "new" || reason === "reset") return reason;
  return "ended";
}

/** chars/4, as OpenClaw estimates, for the one case skald is not there to estimate. */
function roughTokens(messages: AgentMessage[]): number {
  return Math.ceil(JSON.stringify(messages).length / 4);
}

interface AssembleAnswer {
  messages: AgentMessage[];
  estimatedTokens: number;
  systemPromptAddition?: string;
}

interface CommitAnswer {
  status: "committed" | "duplicate";
}

export class SkaldContextEngine implements ContextEngine {
  readonly info: ContextEngine["info"] = {
    id: "skald",
    name: "skald",
    version: VERSION,
    // The host fields skald reads; `abortSignal` is honoured by the client's own deadline.
    acceptedHostParams: ["sessionKey", "prompt", "runtimeSettings", "sessionTarget", "runtimeContext"],
    ownsCompaction: true,
    transcriptSemantics: {
      currentTurnFence: "before-current-turn-entry-v1",
      turnAdvancementIdempotency: "atomic-idempotent-v1",
    },
    turnMaintenanceMode: "foreground",
  };

  /** Sub-agents this process spawned: child session key → its skald session. */
  private readonly children = new Map<string, string>();

  /** The workspace's AGENTS.md as last read, and the modification time it was read at. */
  private agentsMdRead: { mtimeMs: number; text: string } | undefined;

  constructor(
    private readonly client: SkaldClient,
    private readonly spool: CommitSpool,
    private readonly log: Logger,
    /** The agent's workspace (the factory's `workspaceDir`), where its AGENTS.md is. */
    private readonly workspaceDir?: string,
  ) {}

  /**
   * The workspace's AGENTS.md, for the critical rules every compaction appends to its summary
   * (its "Session Startup" and "Red Lines" sections); read again only when it changed. None
   * without a workspace, a file, or when it is over 256 KiB.
   */
  agentsMd(): string | undefined {
    if (!this.workspaceDir) return undefined;
    const path = join(this.workspaceDir, "AGENTS.md");
    try {
      const stat = statSync(path);
      if (!stat.isFile() || stat.size > MAX_AGENTS_MD_BYTES) return undefined;
      if (this.agentsMdRead?.mtimeMs !== stat.mtimeMs) {
        this.agentsMdRead = { mtimeMs: stat.mtimeMs, text: readFileSync(path, "utf8") };
      }
      return this.agentsMdRead.text;
    } catch {
      return undefined;
    }
  }

  async bootstrap(params: BootstrapParams): Promise<Method<"bootstrap">["result"]> {
    const session = skaldSessionId(params.sessionId);
    try {
      await this.flush(session);
      const answer = await this.client.post<{
        bootstrapped: boolean;
        importedMessages: number;
        reason?: string;
      }>(`/v1/sessions/${encodeURIComponent(session)}/bootstrap`, {
        sessionKey: params.sessionKey,
        sessionFile: params.sessionFile,
        sessionTarget: params.sessionTarget,
      });
      const result: Method<"bootstrap">["result"] = {
        bootstrapped: answer.bootstrapped,
        importedMessages: answer.importedMessages,
      };
      if (answer.reason) result.reason = answer.reason;
      return result;
    } catch (error) {
      this.log.warn(`skald: bootstrap of ${session} skipped: ${message(error)}`);
      return { bootstrapped: false, reason: `skald: ${message(error)}` };
    }
  }

  async ingest(params: Method<"ingest">["params"]): Promise<Method<"ingest">["result"]> {
    const session = skaldSessionId(params.sessionId);
    try {
      return await this.client.post<{ ingested: boolean }>(
        `/v1/sessions/${encodeURIComponent(session)}/messages`,
        { message: params.message, isHeartbeat: params.isHeartbeat ?? false, sessionKey: params.sessionKey },
      );
    } catch (error) {
      this.log.error(`skald: ingest into ${session} failed: ${message(error)}`);
      return { ingested: false };
    }
  }

  async ingestBatch(params: Method<"ingestBatch">["params"]): Promise<Method<"ingestBatch">["result"]> {
    const session = skaldSessionId(params.sessionId);
    try {
      return await this.client.post<{ ingestedCount: number }>(
        `/v1/sessions/${encodeURIComponent(session)}/messages`,
        { messages: params.messages, isHeartbeat: params.isHeartbeat ?? false, sessionKey: params.sessionKey },
      );
    } catch (error) {
      this.log.error(`skald: ingestBatch into ${session} failed: ${message(error)}`);
      return { ingestedCount: 0 };
    }
  }

  async commitTurn(params: CommitParams): Promise<Method<"commitTurn">["result"]> {
    const session = skaldSessionId(params.sessionId);
    const body = {
      advancementKey: params.advancementKey,
      messages: params.messages,
      admission: params.admission,
      terminal: params.terminal,
      sessionKey: params.sessionKey,
      sessionTarget: params.sessionTarget,
    };
    if (params.isHeartbeat) {
      // A heartbeat says nothing the model needs later (skald's ingest drops them too).
      return { status: "committed" };
    }
    // Durable first: once this returns the turn is skald's, whether or not skald is up.
    const spooled = await this.spool.put({ session, body });
    try {
      await this.flush(session, spooled);
      const answer = await this.client.post<CommitAnswer>(
        `/v1/sessions/${encodeURIComponent(session)}/commit-turn`,
        body,
      );
      await this.spool.remove(spooled);
      return { status: answer.status };
    } catch (error) {
      if (error instanceof SkaldError && !error.retryable) {
        await this.spool.reject(spooled, message(error));
        this.log.error(`skald: commit ${params.advancementKey} of ${session} refused and kept aside: ${message(error)}`);
      } else if (spooled) {
        this.log.warn(`skald: commit ${params.advancementKey} of ${session} spooled until skald is back: ${message(error)}`);
      } else {
        this.log.error(`skald: commit ${params.advancementKey} of ${session} failed and no spoolDir is set: ${message(error)}`);
      }
      return { status: "committed" };
    }
  }

  async assemble(params: AssembleParams): Promise<AssembleResult> {
    const session = skaldSessionId(params.sessionId);
    const path = `/v1/sessions/${encodeURIComponent(session)}/assemble`;
    const body: Record<string, unknown> = {
      tokenBudget: params.tokenBudget,
      availableTools: params.availableTools ? [...params.availableTools] : undefined,
      model: params.model,
      prompt: params.prompt,
      sessionKey: params.sessionKey,
      citationsMode: params.citationsMode,
      runtimeSettings: params.runtimeSettings,
      runtimeContext: runtimeContextForSkald(params.runtimeContext),
      memory: this.client.config.memory,
      agentsMd: this.agentsMd(),
    };
    try {
      await this.flush(session);
      let answer: AssembleAnswer;
      try {
        // The session skald holds is the context's source: the host's messages are not sent,
        // so a call costs the same at 50 messages as at 500.
        answer = await this.client.post<AssembleAnswer>(path, body);
      } catch (error) {
        if (!(error instanceof SkaldError && error.status === 404)) throw error;
        // skald has never seen this session (it began before skald was the engine): its
        // history comes from the host once.
        answer = await this.client.post<AssembleAnswer>(path, { ...body, messages: params.messages });
      }
      const result: AssembleResult = {
        messages: answer.messages,
        estimatedTokens: answer.estimatedTokens,
      };
      if (answer.systemPromptAddition) result.systemPromptAddition = answer.systemPromptAddition;
      return result;
    } catch (error) {
      this.log.warn(`skald: assemble of ${session} answered with the host's messages: ${message(error)}`);
      return { messages: params.messages, estimatedTokens: roughTokens(params.messages) };
    }
  }

  async compact(params: CompactParams): Promise<CompactResult> {
    const session = skaldSessionId(params.sessionId);
    try {
      await this.flush(session);
      const answer = await this.client.post<CompactResult>(
        `/v1/sessions/${encodeURIComponent(session)}/compact`,
        {
          tokenBudget: params.tokenBudget,
          force: params.force ?? false,
          trigger: compactionTrigger(params),
          currentTokenCount: params.currentTokenCount,
          compactionTarget: params.compactionTarget,
          customInstructions: params.customInstructions,
          agentsMd: this.agentsMd(),
          sessionKey: params.sessionKey,
          agentId: params.agentId,
          sessionTarget: params.sessionTarget,
          runtimeSettings: params.runtimeSettings,
          runtimeContext: runtimeContextForSkald(params.runtimeContext),
        },
      );
      const result: CompactResult = { ok: answer.ok, compacted: answer.compacted };
      if (answer.reason) result.reason = answer.reason;
      if (answer.result) result.result = answer.result;
      return result;
    } catch (error) {
      this.log.error(`skald: compaction of ${session} failed: ${message(error)}`);
      return { ok: false, compacted: false, reason: `skald: ${message(error)}` };
    }
  }

  /**
   * OpenClaw's `session_end` hook (`/new`, `reset`, a deleted or idle session): what skald holds
   * of the ended session that no archive covers yet goes to memory (`POST …/end`), so a session
   * too short to reach a compaction or the upload still leaves its memories. Never throws; a
   * session skald never saw is nothing to archive.
   */
  async endSession(params: SessionEndParams): Promise<void> {
    const session = skaldSessionId(params.sessionId);
    try {
      await this.flush(session);
      await this.client.post(`/v1/sessions/${encodeURIComponent(session)}/end`, {
        reason: endReason(params.reason),
        sessionKey: params.sessionKey,
        nextSessionId: params.nextSessionId,
      });
    } catch (error) {
      if (error instanceof SkaldError && error.status === 404) return;
      this.log.warn(`skald: the end of ${session} was not archived to memory: ${message(error)}`);
    }
  }

  async afterTurn(params: AfterTurnParams): Promise<void> {
    await this.runAfterTurn(skaldSessionId(params.sessionId), {
      tokenBudget: params.tokenBudget,
      isHeartbeat: params.isHeartbeat ?? false,
      autoCompactionSummary: params.autoCompactionSummary,
      runtimeContext: runtimeContextForSkald(params.runtimeContext),
    });
  }

  /** After a committed turn: skald's after-turn work (calibration from the provider's usage,
   * tool statistics, the memory upload). skald never rewrites OpenClaw's transcript: the
   * originals it offloads stay whole in the host's store as in skald's. */
  async maintain(params: MaintainParams): Promise<Method<"maintain">["result"]> {
    const context = params.runtimeContext;
    // after-turn's tokenBudget is the model's window (its memory upload thresholds are shares
    // of it), which OpenClaw names `modelContextWindow` here.
    const window = typeof context?.modelContextWindow === "number" ? context.modelContextWindow : undefined;
    await this.runAfterTurn(skaldSessionId(params.sessionId), {
      tokenBudget: window,
      runtimeContext: runtimeContextForSkald(context),
    });
    return { changed: false, bytesFreed: 0, rewrittenEntries: 0, reason: "skald keeps the host's transcript whole" };
  }

  async prepareSubagentSpawn(params: SpawnParams): Promise<Method<"prepareSubagentSpawn">["result"]> {
    // A forked child gets its parent's history from the host on its first assemble (skald has
    // not seen it, so the host's messages go along once); here skald only learns which skald
    // session the child's end will concern.
    const childKey = params.childSessionKey;
    this.children.set(childKey, skaldSessionId(params.childSessionId ?? childKey));
    return {
      rollback: () => {
        this.children.delete(childKey);
      },
    };
  }

  async onSubagentEnded(params: EndedParams): Promise<void> {
    const session = this.children.get(params.childSessionKey) ?? skaldSessionId(params.childSessionKey);
    this.children.delete(params.childSessionKey);
    if (params.reason === "completed" || params.reason === "released") {
      // The child's work is done: its tool statistics and memory upload run now.
      await this.runAfterTurn(session, {});
    }
  }

  async dispose(): Promise<void> {
    // Anything still spooled gets one more chance before the process ends.
    try {
      await this.flush(undefined, undefined, Math.min(this.client.config.timeoutMs, 5_000));
    } catch (error) {
      this.log.warn(`skald: commits stay spooled for the next run: ${message(error)}`);
    }
  }

  private async runAfterTurn(session: string, body: Record<string, unknown>): Promise<void> {
    try {
      await this.flush(session);
      await this.client.post(`/v1/sessions/${encodeURIComponent(session)}/after-turn`, body);
    } catch (error) {
      // A session skald does not hold has nothing to calibrate.
      if (error instanceof SkaldError && error.status === 404) return;
      this.log.warn(`skald: after-turn of ${session} skipped: ${message(error)}`);
    }
  }

  /** Sends the spooled commits of `session` (every session's when absent), oldest first, but
   * `except` (the caller's own, which it sends itself). */
  private async flush(session?: string, except?: string, timeoutMs?: number): Promise<void> {
    for (const { name, commit } of await this.spool.pending(session)) {
      if (name === except) continue;
      await this.send(name, commit.session, commit.body, timeoutMs);
    }
  }

  private async send(
    name: string,
    session: string,
    body: Record<string, unknown>,
    timeoutMs?: number,
  ): Promise<void> {
    try {
      await this.client.post(`/v1/sessions/${encodeURIComponent(session)}/commit-turn`, body, timeoutMs);
      await this.spool.remove(name);
    } catch (error) {
      if (error instanceof SkaldError && !error.retryable) {
        await this.spool.reject(name, message(error));
        this.log.error(`skald: spooled commit of ${session} refused and kept aside: ${message(error)}`);
        return;
      }
      throw error;
    }
  }
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
