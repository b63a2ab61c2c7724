// The official TypeScript ACP client (@agentclientprotocol/sdk, pinned in package.json)
// driving the real `trio-agents acp` over its stdio, as an editor would. Run by
// tests/acp/test_typescript.py:
//
//   node tests/acp_ts/client.mjs TRIO_AGENTS CWD STORE
//
// TRIO_AGENTS is the installed command, CWD the session's working directory (absolute), STORE
// the --store spec (a directory: the second connection, a fresh process, loads the session).
//
// The client offers fs/read_text_file and fs/write_text_file (on the real disk) and allows
// each permission request once. Connection 1: initialize, session/new, the prompt "hello",
// then a prompt that makes the echo model call write_file. Connection 2 (a new process):
// initialize, session/list, session/load of that session. It prints ONE JSON object
// summarizing what it saw on stdout and exits 0; anything unexpected (a refused request, an
// update the SDK's schema rejects, the agent exiting badly) is a message on stderr and exit 1.
// The assertions are the Python test's: this file only records.

import { spawn } from "node:child_process";
import { once } from "node:events";
import { readFile, writeFile } from "node:fs/promises";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const WRITE_PROMPT = '!tool write_file {"path": "note.txt", "content": "hi"}';

/** Everything one connection's client side was sent or asked. */
function newRecord() {
  return { updates: [], permissions: [], reads: [], writes: [] };
}

/** The client app: the handlers an editor registers, recording into `record`. */
function editor(record) {
  return acp
    .client({ name: "trio-agents-ts-test" })
    .onNotification(acp.methods.client.session.update, ({ params }) => {
      record.updates.push(params.update);
    })
    .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
      record.permissions.push({
        title: params.toolCall.title ?? null,
        kind: params.toolCall.kind ?? null,
        options: params.options.map((o) => ({ kind: o.kind, name: o.name })),
      });
      const once = params.options.find((o) => o.kind === "allow_once");
      if (once === undefined) return { outcome: { outcome: "cancelled" } };
      return { outcome: { outcome: "selected", optionId: once.optionId } };
    })
    .onRequest(acp.methods.client.fs.readTextFile, async ({ params }) => {
      record.reads.push(params.path);
      let lines;
      try {
        lines = (await readFile(params.path, "utf8")).split("\n");
      } catch (error) {
        // As an editor answers for a file that does not exist (yet).
        if (error.code === "ENOENT") throw acp.RequestError.resourceNotFound(params.path);
        throw error;
      }
      const start = (params.line ?? 1) - 1;
      lines = lines.slice(start, params.limit == null ? undefined : start + params.limit);
      return { content: lines.join("\n") };
    })
    .onRequest(acp.methods.client.fs.writeTextFile, async ({ params }) => {
      record.writes.push({ path: params.path, content: params.content });
      await writeFile(params.path, params.content, "utf8");
      return {};
    });
}

/** Run `op(agent, record)` on a connection to a new `trio-agents acp` process. */
async function withAgent(trioAgents, store, op) {
  const child = spawn(trioAgents, ["acp", "--store", store], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const exited = once(child, "exit");
  const record = newRecord();
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  let result;
  try {
    result = await editor(record).connectWith(stream, (agent) => op(agent, record));
  } finally {
    child.stdin.end(); // end of input: the agent closes its sessions and exits
  }
  const [code, signal] = await exited;
  if (code !== 0) throw new Error(`trio-agents acp exited with ${code ?? signal}`);
  return result;
}

async function initialize(agent) {
  return agent.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: true, writeTextFile: true }, terminal: false },
    clientInfo: { name: "trio-agents-ts-test", version: "0" },
  });
}

/**
 * Resolves once every message received so far has been handled. The SDK handles each incoming
 * message in its own promise chain, so a request's answer can resolve before the handlers of
 * the notifications sent ahead of it have run; those handlers do no I/O (microtasks only), so
 * a macrotask turn runs after all of them.
 */
function handled() {
  return new Promise((resolve) => setImmediate(resolve));
}

/** The updates of one turn, summarized: what an editor would show. */
function summarize(updates) {
  const text = (kind) =>
    updates
      .filter((u) => u.sessionUpdate === kind && u.content.type === "text")
      .map((u) => u.content.text)
      .join("");
  // One entry per tool call id, merged over its tool_call and tool_call_updates.
  const calls = new Map();
  for (const u of updates) {
    if (u.sessionUpdate !== "tool_call" && u.sessionUpdate !== "tool_call_update") continue;
    const call = calls.get(u.toolCallId) ?? { statuses: [], content: [] };
    if (u.sessionUpdate === "tool_call") call.announced = true;
    for (const field of ["title", "kind", "locations", "rawInput"]) {
      if (u[field] != null) call[field] = u[field];
    }
    if (u.status != null) call.statuses.push(u.status);
    if (u.content != null) call.content = u.content;
    calls.set(u.toolCallId, call);
  }
  const toolCalls = [...calls.values()].map((c) => ({
    announced: c.announced ?? false,
    title: c.title ?? null,
    kind: c.kind ?? null,
    statuses: c.statuses,
    locations: (c.locations ?? []).map((l) => l.path),
    diffs: c.content
      .filter((b) => b.type === "diff")
      .map((b) => ({ path: b.path, oldText: b.oldText ?? null, newText: b.newText })),
    contentTypes: c.content.map((b) => b.type),
  }));
  return {
    userText: text("user_message_chunk"),
    agentText: text("agent_message_chunk"),
    toolCalls,
  };
}

async function main() {
  const [trioAgents, cwd, store] = process.argv.slice(2);
  if (store === undefined) {
    process.stderr.write("usage: node client.mjs TRIO_AGENTS CWD STORE\n");
    process.exit(2);
  }
  const first = await withAgent(trioAgents, store, async (agent, record) => {
    const init = await initialize(agent);
    const session = await agent.request(acp.methods.agent.session.new, { cwd, mcpServers: [] });
    const turn = async (text) => {
      record.updates.length = 0;
      const response = await agent.request(acp.methods.agent.session.prompt, {
        sessionId: session.sessionId,
        prompt: [{ type: "text", text }],
      });
      await handled();
      return { stopReason: response.stopReason, ...summarize(record.updates) };
    };
    const hello = await turn("hello");
    const write = await turn(WRITE_PROMPT);
    return {
      protocolVersion: init.protocolVersion,
      loadSession: init.agentCapabilities?.loadSession ?? false,
      sessionId: session.sessionId,
      hello,
      write,
      permissions: record.permissions,
      reads: record.reads,
      writes: record.writes,
    };
  });
  const second = await withAgent(trioAgents, store, async (agent, record) => {
    await initialize(agent);
    const list = await agent.request(acp.methods.agent.session.list, {});
    record.updates.length = 0;
    await agent.request(acp.methods.agent.session.load, {
      sessionId: first.sessionId,
      cwd,
      mcpServers: [],
    });
    await handled();
    return {
      listed: list.sessions.map((s) => ({
        isTheSession: s.sessionId === first.sessionId,
        cwd: s.cwd,
      })),
      load: summarize(record.updates),
    };
  });
  const onDisk = await readFile(`${cwd}/note.txt`, "utf8").catch(() => null);
  process.stdout.write(`${JSON.stringify({ ...first, ...second, onDisk })}\n`);
}

main().catch((error) => {
  process.stderr.write(`client.mjs: ${error?.stack ?? JSON.stringify(error)}\n`);
  process.exit(1);
});
