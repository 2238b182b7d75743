/**
 * Check one product's stock
 *
 * Logs the SKU, parses skills/stock/assets/<sku>.json and advances to
 * `in-stock` when `on_hand` is above zero; it then logs the reservations in
 * skills/stock/assets/<sku>.reservations.json. A stock file that does not
 * parse makes it throw, and so does a missing reservations file, even after
 * the advance (the session routes through on_error either way). An empty
 * shelf has no branch yet: the script then returns without deciding, which
 * the runtime treats as a failure, never as approval.
 */
export default async function ({ variables, tools }) {
  console.log(`checking ${variables.sku}`);
  const text = await tools.readFile({ file_path: `skills/stock/assets/${variables.sku}.json` });
  const stock = JSON.parse(text);
  if (stock.on_hand > 0) {
    await tools.archmax_advance({ to: "in-stock", reason: `${stock.on_hand} of ${stock.sku} on hand.` });
    const reservations = await tools.readFile({ file_path: `skills/stock/assets/${stock.sku}.reservations.json` });
    console.log(`reservations: ${reservations}`);
  }
}
