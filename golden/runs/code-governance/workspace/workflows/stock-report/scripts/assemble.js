/**
 * Assemble the stock report, and note what the state refuses
 *
 * Reads skills/stock/assets/levels.json (the stock bundle is enabled here)
 * and writes reports/daily/stock.md, the one place this state's
 * narrowed write_file reaches. Along the way it tries five calls this state
 * does not grant: a write to reports/stock.md (outside the narrowed path), a read of
 * the pricing bundle (not enabled here), a read of this workflow's own spec
 * (the authoring plane), remove_file (forbidden here) and write_todos (never
 * offered to a code state). Each refusal is
 * caught and kept. It logs which tools the bridge shows, then advances to
 * `report` with the refusals in the reason.
 */
export default async function ({ tools }) {
  const levels = JSON.parse(await tools.readFile({ file_path: "skills/stock/assets/levels.json" }));
  const out = Object.entries(levels).filter(([, units]) => units === 0).map(([sku]) => sku);
  const body = `# Stock\n\nOut of stock: ${out.join(", ") || "none"}\n`;

  const refused = [];
  const attempt = async (label, call) => {
    try {
      await call();
      refused.push(`${label}: allowed`);
    } catch (err) {
      refused.push(`${label}: ${err.message}`);
    }
  };
  await attempt("write reports/stock.md", () => tools.writeFile({ file_path: "reports/stock.md", content: body }));
  await attempt("read pricing", () => tools.readFile({ file_path: "skills/pricing/assets/margins.json" }));
  await attempt("read own spec", () => tools.readFile({ file_path: "workflows/stock-report/workflow.yaml" }));
  await attempt("remove draft", () => tools.removeFile({ file_path: "reports/daily/old.md" }));
  await attempt("todos", () => tools.writeTodos({ todos: [{ content: "restock BOWL-1", status: "pending" }] }));

  await tools.writeFile({ file_path: "reports/daily/stock.md", content: body });
  console.log(`tools: ${Object.keys(tools).join(", ")}`);
  console.log(`archmaxEval: ${typeof tools.archmaxEval}, archmaxWait: ${typeof tools.archmaxWait}, writeTodos: ${typeof tools.writeTodos}`);
  await tools.archmax_advance({ to: "report", reason: `Out of stock: ${out.join(", ")}. Refused: ${refused.join(" | ")}` });
}
