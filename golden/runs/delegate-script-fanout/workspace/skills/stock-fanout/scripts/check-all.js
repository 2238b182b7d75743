/**
 * One stock-check sub-workflow per reorder line, run together.
 * Each answer arrives as JSON text: { message, returns: { in_stock, warehouse } }.
 */
const lines = args.variables.orders ?? [];
const answers = await Promise.all(
  lines.map((line) => tools.archmaxWorkflowStockCheck({ sku: line.sku, quantity: line.quantity })),
);
const result = lines.map((line, index) => ({
  sku: line.sku,
  quantity: line.quantity,
  ...JSON.parse(answers[index]).returns,
}));
result;
