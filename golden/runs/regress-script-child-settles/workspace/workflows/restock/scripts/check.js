/**
 * Check stock for a restock alert
 *
 * Starts the stock-check sub-workflow without awaiting it, reads the shelf
 * counts itself, then waits for the count to reach the quantity. The count is
 * never refreshed inside the loop, so the script spins until
 * settings.timeoutMs stops it and the state fails through on_error.
 */
export default async function ({ variables, tools }) {
  const answer = tools.archmaxWorkflowStockCheck({ sku: variables.sku, quantity: variables.quantity });
  const stock = JSON.parse(await tools.readFile({ file_path: "skills/warehouse/assets/stock.json" }));
  const units = Object.values(stock[variables.sku] ?? {}).reduce((sum, n) => sum + n, 0);
  while (units < variables.quantity) {
    // waits for a restock that this loop never sees
  }
  const { returns } = JSON.parse(await answer);
  await tools.archmaxAdvance({ to: "reply", reason: `in stock: ${returns.in_stock}` });
}
