// The OpenClaw plugin `skald`: registers the context engine `skald`, skald's tools and the
// `session_end` hook that archives an ended session's memory. The
// plugin is a thin client of `skald serve` (see README.md): skald holds the sessions, the
// originals of what it offloads and the memories; OpenClaw keeps its own transcript whole.

import { appendFileSync } from "node:fs";

import type { OpenClawPluginApi } from "openclaw/plugin-sdk/plugin-entry";

import { SkaldClient, parseConfig } from "./client.js";
import { SkaldContextEngine } from "./engine.js";
import { CommitSpool } from "./spool.js";
import { skaldTools } from "./tools.js";

export { SkaldClient, parseConfig } from "./client.js";
export { SkaldContextEngine, skaldSessionId } from "./engine.js";
export { CommitSpool } from "./spool.js";
export { skaldTools, TOOL_DEFINITIONS } from "./tools.js";

const plugin = {
  id: "skald",
  name: "skald",
  description:
    "skald as the context engine: large tool outputs offloaded behind fetchable REF_IDs, old results pruned, structured compaction, long-term memory.",
  register(api: OpenClawPluginApi): void {
    const client = new SkaldClient(parseConfig(api.pluginConfig, process.env, undefined));
    const trace = process.env.SKALD_OPENCLAW_TRACE;
    // The engine OpenClaw made last: the session-end hook goes through it, so that commits
    // waiting in its spool reach skald before the session is archived.
    let latest: SkaldContextEngine | undefined;
    api.registerContextEngine("skald", (context) => {
      // The spool lives with the agent's state when the host says where that is.
      const config = parseConfig(api.pluginConfig, process.env, context.agentDir);
      const engine = new SkaldContextEngine(
        new SkaldClient(config),
        new CommitSpool(config.spoolDir),
        api.logger,
        context.workspaceDir,
      );
      latest = trace ? traced(engine, trace) : engine;
      return latest;
    });
    // A session that ends (`/new`, `reset`, deleted, idle) has its memory archived by skald.
    api.on("session_end", async (event) => {
      let engine = latest;
      if (!engine) {
        const made = new SkaldContextEngine(client, new CommitSpool(undefined), api.logger);
        engine = trace ? traced(made, trace) : made;
      }
      await engine.endSession({
        sessionId: event.sessionId,
        sessionKey: event.sessionKey,
        reason: event.reason,
        nextSessionId: event.nextSessionId,
      });
    });
    for (const tool of skaldTools(client)) {
      api.registerTool(tool);
    }
  },
};

export default plugin;

/** The engine with every lifecycle call (name, parameters, answer or error) appended as a JSON
 * line to `path`: what the host really passes, for tests and for debugging a host upgrade. */
function traced(engine: SkaldContextEngine, path: string): SkaldContextEngine {
  const write = (record: Record<string, unknown>) => {
    const json = JSON.stringify(record, (_key, value: unknown) =>
      value instanceof Set ? { set: [...value] } : typeof value === "function" ? "[function]" : value,
    );
    appendFileSync(path, `${json}\n`);
  };
  return new Proxy(engine, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== "function" || typeof property !== "string") return value;
      return async (...args: unknown[]) => {
        const started = Date.now();
        try {
          const result: unknown = await (value as (...a: unknown[]) => unknown).apply(target, args);
          write({ method: property, params: args[0], result, ms: Date.now() - started });
          return result;
        } catch (error) {
          write({ method: property, params: args[0], error: String(error), ms: Date.now() - started });
          throw error;
        }
      };
    },
  });
}
