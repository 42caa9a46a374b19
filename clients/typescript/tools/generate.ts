/** `npm run generate`: write src/schema.ts from the schema a real server serves. */
import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

import { servedTypes } from "./schema.js";

const target = fileURLToPath(new URL("../../src/schema.ts", import.meta.url));
writeFileSync(target, await servedTypes());
console.log(`wrote ${target}`);
