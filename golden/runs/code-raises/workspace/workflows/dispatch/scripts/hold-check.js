/**
 * Stop a held order before it reaches the warehouse
 *
 * Looks `order_id` up in skills/order-book/assets/orders.json. An order with a
 * `hold` raises `order-on-hold` with the hold's cause; nothing in this
 * workflow may release it. Otherwise it advances to `release`.
 *
 * After a raise the script still tries to advance (the runtime refuses it,
 * and the refusal is logged) and then throws, to show that neither a later
 * advance nor an error changes a decision already made.
 */
export default async function ({ variables, tools }) {
  const orders = JSON.parse(await tools.readFile({ file_path: "skills/order-book/assets/orders.json" }));
  const order = orders.find((o) => o.order_id === variables.order_id);
  if (order?.hold) {
    await tools.archmax_raise({ code: "order-on-hold", reason: `${order.order_id} is on hold: ${order.hold}.` });
    try {
      await tools.archmax_advance({ to: "release", reason: "release it anyway" });
    } catch (err) {
      console.log(`second decision refused: ${err.message}`);
    }
    throw new Error("the hold check stops here");
  }
  await tools.archmax_advance({ to: "release", reason: `${variables.order_id} carries no hold.` });
}
