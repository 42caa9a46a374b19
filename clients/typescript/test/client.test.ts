/**
 * The client against a real `partner-memory serve` on loopback: every operation,
 * the error mapping, keys, namespaces with "/" in them, timeouts and aborts.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import {
  AccessDeniedError,
  ConflictError,
  InvalidInputError,
  MemoryClient,
  NotFoundError,
  PartnerMemoryError,
  StorageUnavailableError,
} from "../src/index.js";
import { cli, startServer, type Served } from "../tools/server.js";

const FACTS = [
  ["My sister Ines lives in Porto and teaches chemistry.", "Porto sounds lovely."],
  ["I am training for the Berlin marathon in September.", "Good luck with the training!"],
  ["My cat Miso only eats salmon.", "Miso has refined taste."],
  ["I switched my team to Rust last spring.", "How did the migration go?"],
  ["We are planning a trip to Kyoto in April.", "Kyoto in spring is wonderful."],
  ["My favourite tea is genmaicha.", "A roasted rice tea, nice."],
] as const;

let server: Served;

before(async () => {
  server = await startServer();
});

after(async () => {
  await server?.stop();
});

describe("a namespace's memory", () => {
  test("record, roll, read, recall and forget", async () => {
    const memory = new MemoryClient({ url: server.url, namespace: "team/alice" });
    assert.equal(memory.namespace, "team/alice");
    const day = Date.UTC(2026, 2, 1);
    for (const [n, [said, answer]] of FACTS.entries()) {
      const turn = await memory.recordTurn(said, answer, { timestamp: day + n * 60_000 });
      assert.equal(turn.namespace, "team/alice");
      assert.deepEqual(
        turn.messages.map((m) => m.role),
        ["user", "assistant"],
      );
    }
    const recorded = await memory.record({
      userInput: "Remind me: the boiler service is on Friday.",
      assistantOutput: "Noted: boiler service on Friday.",
      metadata: { channel: "sms" },
      timestamp: day + 3_600_000,
    });
    assert.equal(recorded.messages[0]?.metadata?.channel, "sms");
    const messages = await memory.recordMessages(
      [
        { role: "user", content: "I bought a blue bicycle.", id: "bike-1", timestamp: day + 7_200_000 },
        { role: "assistant", content: "Enjoy the rides!", id: "bike-2", timestamp: day + 7_200_001 },
      ],
      { interaction: day + 7_200_000 },
    );
    assert.equal(messages.window_length, 16);

    const window = await memory.window();
    assert.equal(window.messages.length, 16);

    const rolled = await memory.rollNow({ idle: true });
    assert.equal(rolled.rolled, true);
    assert.ok(rolled.summary && rolled.summary.length > 0);
    assert.equal((await memory.window()).messages.length, 0);
    const nothing = await memory.rollNow();
    assert.equal(nothing.rolled, false);

    const session = await memory.endSession();
    assert.ok(session.memory_session_id);

    const units = await memory.units({ limit: 5 });
    assert.equal(units.total, 1);
    const unitId = units.units[0]!.id;
    const unit = await memory.unit(unitId.slice(0, 8), { messages: true });
    assert.equal(unit.unit.id, unitId);
    assert.equal(unit.messages?.length, 16);
    const sliceId = unit.slices[0]!.id;
    const slice = await memory.readSlice(unitId, sliceId);
    assert.equal(slice.messages.length, 16);
    assert.ok(slice.provenance.length > 0);

    const rollings = await memory.rollings({ after: 0, limit: 10 });
    assert.equal(rollings.rollings.length, 1);
    assert.equal(rollings.rollings[0]?.message_count, 16);
    const topics = await memory.topics({ limit: 10 });
    assert.deepEqual(topics.topics, []); // offline: no LLM filed any
    const stats = await memory.stats();
    assert.equal(stats.unit_count, 1);
    assert.equal(stats.rolling_totals.rolling_count, 1);

    const context = await memory.context();
    assert.ok(context.blocks.some((b) => b.name === "dialog_history"));
    const xml = await memory.contextXml({ domains: ["MEMORY"] });
    assert.match(xml, /<dialog_history source=/);

    const found = await memory.recall("Where is the trip in April?", { k: 3 });
    assert.match(found.hits[0]!.message.content, /Kyoto/);
    const asValue = await memory.recall({ query: "cat food", k: 2, role: "user" });
    assert.ok(asValue.hits.length <= 2);
    assert.ok(asValue.hits.every((h) => h.message.role === "user"));
    assert.match(asValue.hits[0]!.message.content, /Miso/);
    const inTime = await memory.recall("bicycle", { since: day + 7_000_000, until: day + 8_000_000 });
    assert.ok(inTime.hits.length >= 1);
    assert.ok(inTime.hits.every((h) => h.message.id === "bike-1" || h.message.id === "bike-2"));
    const byMetadata = await memory.recall("boiler", { metadata: { channel: "sms" } });
    assert.equal(byMetadata.hits.length, 1);

    assert.equal(await memory.forgetMessages(["bike-1"]), 1);
    const gone = await memory.recall("blue bicycle", { k: 5 });
    assert.ok(gone.hits.every((h) => h.message.id !== "bike-1"));
    const again = await memory.unit(unitId);
    const newest = again.slices.at(-1)!;
    assert.ok((await memory.forgetSlice(unitId, newest.id)) > 0);
    await memory.forgetUnit(unitId);
    assert.equal((await memory.units()).total, 0);

    await memory.recordTurn("One more thing.", "Go on.");
    await memory.forgetAll();
    assert.equal((await memory.window()).messages.length, 0); // it goes on, empty
  });

  test("namespaces: create, list, and another through withNamespace", async () => {
    const root = new MemoryClient({ url: server.url, namespace: "lists/one" });
    const made = await root.createNamespace();
    assert.equal(made.namespace, "lists/one");
    await assert.rejects(root.createNamespace(), ConflictError);
    await root.ensureNamespace(); // exists: nothing to do
    await root.withNamespace("lists/two").createNamespace();
    const page = await root.namespaces({ limit: 100 });
    const names = page.namespaces.map((n) => n.namespace);
    assert.ok(names.includes("lists/one") && names.includes("lists/two"));
    const first = await root.namespaces({ limit: 1 });
    assert.equal(first.namespaces.length, 1);
    assert.ok(first.next_after);
    assert.equal(await root.ready(), true);
  });
});

describe("errors", () => {
  test("the service's statuses become the error classes", async () => {
    const memory = new MemoryClient({ url: server.url, namespace: "errors/here" });
    await memory.recordTurn("hello", "hi");
    const missing = await memory.unit("nope").catch((e: unknown) => e);
    assert.ok(missing instanceof NotFoundError);
    assert.ok(missing instanceof PartnerMemoryError);
    assert.equal(missing.status, 404);
    assert.equal(missing.code, "not_found");
    const unknown = new MemoryClient({ url: server.url, namespace: "never/made" });
    await assert.rejects(unknown.stats(), NotFoundError);
    const invalid = await memory.recall("x", { k: 0 }).catch((e: unknown) => e);
    assert.ok(invalid instanceof InvalidInputError);
    assert.equal(invalid.status, 422);
    assert.ok(invalid.fields.some((f) => f.field.endsWith("k")));
    await assert.rejects(memory.recall("   "), InvalidInputError);
    await assert.rejects(memory.forgetMessages([]), InvalidInputError);
  });

  test("an unreachable service, a slow one, and a caller's abort", async () => {
    const closed = new MemoryClient({ url: "http://127.0.0.1:9", namespace: "x" });
    await assert.rejects(closed.window(), StorageUnavailableError);
    assert.equal(await closed.ready(), false);
    const hanging: typeof fetch = (_input, init) =>
      new Promise((_resolve, reject) => {
        init?.signal?.addEventListener("abort", () => reject(init.signal?.reason));
      });
    const slow = new MemoryClient({ url: server.url, namespace: "x", fetch: hanging, timeoutMs: 50 });
    const late = await slow.window().catch((e: unknown) => e);
    assert.ok(late instanceof StorageUnavailableError);
    assert.match(late.message, /within 50 ms/);
    const patient = new MemoryClient({ url: server.url, namespace: "x", fetch: hanging });
    const controller = new AbortController();
    const pending = patient.window({ signal: controller.signal });
    controller.abort();
    await assert.rejects(pending, (e: unknown) => e instanceof DOMException && e.name === "AbortError");
    assert.throws(() => new MemoryClient({ url: "" }), InvalidInputError);
    assert.throws(() => new MemoryClient({ url: server.url, timeoutMs: 0 }), InvalidInputError);
  });
});

describe("keys", () => {
  test("a key opens its namespaces up to its scope, and nothing else", async () => {
    const keyed = await startServer();
    try {
      const made = JSON.parse(
        cli("keys", "create", "--namespaces", "team/*", "--scope", "write", "--db", keyed.database, "--json"),
      ) as { token: string };
      const reader = JSON.parse(
        cli("keys", "create", "--namespaces", "team/*", "--scope", "read", "--db", keyed.database, "--json"),
      ) as { token: string };
      const writer = new MemoryClient({ url: keyed.url, namespace: "team/bob", key: made.token });
      await writer.recordTurn("My locker code is 4417.", "I will remember it.");
      assert.equal((await writer.window()).messages.length, 2);
      const outside = writer.withNamespace("other/carol");
      const refused = await outside.window().catch((e: unknown) => e);
      assert.ok(refused instanceof AccessDeniedError);
      assert.equal(refused.status, 403);
      const anonymous = new MemoryClient({ url: keyed.url, namespace: "team/bob" });
      const unknown = await anonymous.window().catch((e: unknown) => e);
      assert.ok(unknown instanceof AccessDeniedError);
      assert.equal(unknown.status, 401);
      const readOnly = new MemoryClient({ url: keyed.url, namespace: "team/bob", key: reader.token });
      assert.equal((await readOnly.window()).messages.length, 2);
      await assert.rejects(readOnly.recordTurn("x", "y"), AccessDeniedError);
      await assert.rejects(readOnly.forgetAll(), AccessDeniedError);
    } finally {
      await keyed.stop();
    }
  });
});
