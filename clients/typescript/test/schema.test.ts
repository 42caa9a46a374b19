/** The checked-in types are those of the schema the service serves now. */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { startServer } from "../tools/server.js";
import { typesOf } from "../tools/schema.js";

const CHECKED_IN = fileURLToPath(new URL("../../src/schema.ts", import.meta.url));

test("src/schema.ts is generated from the schema serve produces (npm run generate)", async () => {
  const server = await startServer();
  let document: { paths: Record<string, unknown> };
  try {
    document = (await (await fetch(`${server.url}/openapi.json`)).json()) as typeof document;
  } finally {
    await server.stop();
  }
  const checkedIn = readFileSync(CHECKED_IN, "utf8");
  assert.equal(await typesOf(document), checkedIn, "the service's routes changed: npm run generate");
  // the check would see a changed route: one more path gives other types
  const changed = structuredClone(document);
  changed.paths["/v1/namespaces/{namespace}/new-route"] = changed.paths["/healthz"];
  assert.notEqual(await typesOf(changed), checkedIn);
});
