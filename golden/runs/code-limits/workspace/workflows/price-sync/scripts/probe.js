/**
 * Describe what the sandbox offers
 *
 * Logs whether `require`, `process` and `fetch` exist and what a dynamic
 * import of a Node built-in does, then advances to `report`. The module name
 * is computed: a literal `import("fs")` is already refused by validate.
 */
export default async function ({ tools }) {
  console.log(`require: ${typeof require}`);
  console.log(`process: ${typeof process}`);
  console.log(`fetch: ${typeof fetch}`);
  const builtin = ["f", "s"].join("");
  try {
    await import(builtin);
    console.log("import fs: loaded");
  } catch (err) {
    console.log(`import fs: ${err.name}: ${err.message}`);
  }
  await tools.archmax_advance({ to: "report", reason: "require, process and fetch are absent; imports are refused." });
}
