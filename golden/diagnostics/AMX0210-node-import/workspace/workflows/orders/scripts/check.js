/**
 * Order check
 *
 * Reads the order file from disk and advances to `answer`.
 */
import { readFileSync } from "node:fs";

export default async function ({ tools }) {
  const orders = JSON.parse(readFileSync("orders.json", "utf8"));
  await tools.archmax_advance({ to: "answer", reason: `${orders.length} orders on file.` });
}
