/**
 * Screen a refund request before any model call
 *
 * Reads `order_id` and `customer_email` from the variables and looks the order
 * up in skills/order-book/assets/orders.json (the bundle is enabled on this
 * state). An unknown order, a different requester or an order that has not
 * been delivered advances to `decline` with the cause; otherwise it advances
 * to `assess` with a one-line summary of the order.
 */
export default async function ({ state, trigger, variables, tools }) {
  const orders = JSON.parse(await tools.readFile({ file_path: "skills/order-book/assets/orders.json" }));
  const order = orders.find((o) => o.order_id === variables.order_id);
  if (!order) {
    await tools.archmaxAdvance({ to: "decline", reason: `There is no order ${variables.order_id}.` });
    return;
  }
  if (order.email !== String(variables.customer_email).toLowerCase()) {
    await tools.archmaxAdvance({ to: "decline", reason: `${order.order_id} was placed from another address.` });
    return;
  }
  if (order.status !== "delivered") {
    await tools.archmaxAdvance({ to: "decline", reason: `${order.order_id} is still ${order.status}; it cannot be refunded yet.` });
    return;
  }
  console.log(`${state} (${trigger}) passed ${order.order_id}`);
  await tools.archmaxAdvance({ to: "assess", reason: `${order.order_id} was delivered; order total ${order.total.toFixed(2)} EUR.` });
}
