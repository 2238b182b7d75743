/**
 * Is one order still inside its refund window?
 *
 * Reads `args.order_id` (the model's argument) and `args.variables.requested_on`
 * (the session variable), looks the order up in ../assets/orders.json and
 * the window in ../assets/policy.json, and returns
 * `{ order_id, delivered_on, requested_on, window_days, days, in_window }`,
 * or `{ error }` when an input is missing.
 */
const DAY_MS = 24 * 60 * 60 * 1000;

function daysBetween(from, to) {
  return Math.round((Date.parse(to) - Date.parse(from)) / DAY_MS);
}

async function check() {
  const orderId = args.order_id;
  const requestedOn = args.variables?.requested_on;
  if (!orderId || !requestedOn) return { error: "pass order_id; requested_on comes from the session" };
  const orders = JSON.parse(await tools.readFile({ file_path: "skills/refund-window/assets/orders.json" }));
  const policy = JSON.parse(await tools.readFile({ file_path: "skills/refund-window/assets/policy.json" }));
  const order = orders.find((o) => o.order_id === orderId);
  if (!order) return { error: `no order ${orderId}` };
  const windowDays = policy.window_days[order.category] ?? policy.window_days.default;
  const days = daysBetween(order.delivered_on, requestedOn);
  return { order_id: orderId, delivered_on: order.delivered_on, requested_on: requestedOn, window_days: windowDays, days, in_window: days <= windowDays };
}

await check();
