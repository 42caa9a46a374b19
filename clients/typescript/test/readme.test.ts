/** The README's examples run as written, against a real service (and, for the Vercel
 * AI SDK example, a local server speaking the chat-completions protocol). */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server } from "node:http";
import { type AddressInfo } from "node:net";
import { after, before, test } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";

import { startServer, type Served } from "../tools/server.js";

const run = promisify(execFile);
const README = readFileSync(fileURLToPath(new URL("../../README.md", import.meta.url)), "utf8");
const EXAMPLES = [...README.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!);
const PACKAGE = pathToFileURL(fileURLToPath(new URL("../src/index.js", import.meta.url))).href;

let memory: Served;

before(async () => {
  memory = await startServer();
});

after(async () => {
  await memory?.stop();
});

/** Run an example as its reader would, with the addresses of this test's servers. */
async function runExample(code: string, llm?: string): Promise<string> {
  let source = code
    .replaceAll('"partner-memory-client"', JSON.stringify(PACKAGE))
    .replaceAll('"http://127.0.0.1:8000"', JSON.stringify(memory.url));
  if (llm) source = source.replaceAll('"http://127.0.0.1:11434/v1"', JSON.stringify(llm));
  // beside the package's own modules, so `ai` resolves from its node_modules
  const file = fileURLToPath(new URL(`../example-${process.pid}.mjs`, import.meta.url));
  writeFileSync(file, source);
  try {
    return (await run(process.execPath, [file], { timeout: 120_000 })).stdout;
  } finally {
    rmSync(file, { force: true });
  }
}

test("the five-line example finds Kyoto", async () => {
  assert.equal(EXAMPLES.length, 2);
  const printed = await runExample(EXAMPLES[0]!);
  assert.equal(printed.trim(), "I'm travelling to Kyoto next week.");
});

/** A chat-completions server whose answer repeats what its system prompt recalled. */
async function fakeLlm(): Promise<{ url: string; server: Server; prompts: string[] }> {
  const prompts: string[] = [];
  const server = createServer((request: IncomingMessage, response) => {
    let body = "";
    request.on("data", (chunk: Buffer) => (body += chunk.toString()));
    request.on("end", () => {
      const asked = JSON.parse(body) as { messages: { role: string; content: string }[] };
      const system = asked.messages.find((m) => m.role === "system")?.content ?? "";
      prompts.push(system);
      const recalled = /<recalled>\n([\s\S]*?)\n?<\/recalled>/.exec(system)?.[1]?.trim();
      const text = recalled ? `From memory: ${recalled}` : "Nice to meet you.";
      response.writeHead(200, { "Content-Type": "application/json" });
      response.end(
        JSON.stringify({
          id: "chat-1",
          object: "chat.completion",
          created: 0,
          model: "llama3.2",
          choices: [{ index: 0, message: { role: "assistant", content: text }, finish_reason: "stop" }],
          usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/v1`, server, prompts };
}

test("the Vercel AI SDK example keeps the chat's memory", async () => {
  const llm = await fakeLlm();
  try {
    const printed = (await runExample(EXAMPLES[1]!, llm.url)).trim().split("\n");
    assert.equal(printed[0], "Nice to meet you.");
    assert.match(printed[1] ?? "", /From memory: .*My daughter's name is Ada\./);
    assert.equal(llm.prompts.length, 2);
  } finally {
    llm.server.close();
  }
});
