// skald's tools, registered with OpenClaw so its model can call them and OpenClaw runs them
// through skald (`POST /v1/tools/{name}`, the executor skald's proxy uses). The definitions are
// skald's own, as `GET /v1/tools` lists them (`tool-definitions.json`; a test of skald checks
// they are the same), because OpenClaw needs them before any request: `register` is synchronous
// and the manifest's `contracts.tools` names them statically.

import type { AnyAgentTool } from "openclaw/plugin-sdk/agent-harness-runtime";

import { SkaldClient } from "./client.js";
import definitions from "./tool-definitions.json" with { type: "json" };

/** One of skald's tool definitions. */
export interface ToolDefinition {
  name: string;
  description?: string;
  parameters: Record<string, unknown>;
}

export const TOOL_DEFINITIONS: readonly ToolDefinition[] = definitions as ToolDefinition[];

/** The memory tools (all but `fetch_original_data`). */
export const MEMORY_TOOLS: ReadonlySet<string> = new Set(
  TOOL_DEFINITIONS.map((tool) => tool.name).filter((name) => name !== "fetch_original_data"),
);

const LABELS: Record<string, string> = {
  fetch_original_data: "Fetch original data",
  search_memories: "Search memories",
  memory_ls: "List memories",
  memory_read: "Read memory",
  commit_memory: "Remember",
  memory_forget: "Forget memory",
  search_docs: "Search documents",
};

interface ToolAnswer {
  content: string;
  isError: boolean;
}

/** skald's tools as OpenClaw agent tools; without memory, only `fetch_original_data`. */
export function skaldTools(client: SkaldClient): AnyAgentTool[] {
  return TOOL_DEFINITIONS.filter((tool) => client.config.memory || !MEMORY_TOOLS.has(tool.name)).map(
    (tool): AnyAgentTool => ({
      name: tool.name,
      label: LABELS[tool.name] ?? tool.name,
      description: tool.description ?? tool.name,
      // skald's JSON Schema; TypeBox schemas are JSON Schema, which is what the host sends on.
      parameters: tool.parameters as AnyAgentTool["parameters"],
      // Offered to the model directly, never behind OpenClaw's tool-search catalog: skald's
      // placeholders and memory guidance name these tools, and skald only offloads when the
      // host runs `fetch_original_data` (it is in `availableTools`).
      catalogMode: "direct-only",
      async execute(_toolCallId, params) {
        const answer = await client.post<ToolAnswer>(`/v1/tools/${encodeURIComponent(tool.name)}`, {
          arguments: params ?? {},
        });
        // OpenClaw's contract: a failed tool throws, and the host shows the model the message.
        if (answer.isError) throw new Error(answer.content);
        return { content: [{ type: "text", text: answer.content }], details: { tool: tool.name } };
      },
    }),
  );
}
