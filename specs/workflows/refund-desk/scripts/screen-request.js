/**
 * Screen a refund request before any model call
 *
 * The entry state of refund-desk for both triggers, `manual` and
 * `email_reply`. It reads the variables the start supplied (`order_id`,
 * `customer_email`, and the customer's words: `reason` on a manual start,
 * the email `body` on `email_reply`), loads
 * skills/order-data/assets/orders.json through the tool bridge, and checks,
 * in this order:
 *
 *   1. The order file parses. If it does not, the script raises
 *      `order-data-unavailable`: nothing can be screened without it.
 *   2. `order_id` names an order. Otherwise: decline.
 *   3. `customer_email` is the order's address (compared without case).
 *      Otherwise: decline, without repeating the address on file.
 *   4. The order is not on a fraud hold. Otherwise the script raises
 *      `fraud-hold`; the host routes such sessions to the risk team, and
 *      customer care must not answer them.
 *   5. The order was delivered. A cancelled order was refunded when it was
 *      cancelled, and one still processing or with the carrier has nothing
 *      to refund yet: decline, naming the status.
 *   6. Some money is still refundable: the order's value (lines plus
 *      shipping) exceeds `refunded_to_date`. Otherwise: decline.
 *   7. The customer said what is wrong (a non-blank `reason` or `body`).
 *      Otherwise: decline, asking for the reason.
 *
 * Every decline advances to `decline` with a reason the declining agent can
 * pass on. When all checks pass it advances to `decide-refund` with a
 * one-line summary of the order (delivery, lines, value, refunded so far).
 */

const ORDERS_PATH = "skills/order-data/assets/orders.json";

const cents = (euros) => Math.round(Number(euros) * 100);
const euros = (amount) => `${(amount / 100).toFixed(2)} EUR`;

export default async function ({ state, trigger, variables, tools }) {
  const decline = (reason) => tools.archmax_advance({ to: "decline", reason });

  let orders;
  try {
    orders = JSON.parse(await tools.readFile({ file_path: ORDERS_PATH }));
    if (!Array.isArray(orders)) throw new Error("the file is not a list of orders");
  } catch (err) {
    await tools.archmax_raise({
      code: "order-data-unavailable",
      reason: `${state} could not load ${ORDERS_PATH}: ${err.message}`,
    });
    return;
  }

  const orderId = String(variables.order_id ?? "").trim();
  const order = orders.find((o) => o.order_id === orderId);
  if (!order) {
    await decline(`There is no order ${orderId}. Ask the customer to check the number on their confirmation email.`);
    return;
  }

  const requester = String(variables.customer_email ?? "").trim().toLowerCase();
  if (requester !== String(order.customer?.email ?? "").toLowerCase()) {
    await decline(
      `${orderId} was not placed with the address this request came from. Ask the customer to write from the address they ordered with; do not say which address that is.`,
    );
    return;
  }

  if (order.fraud_hold === true) {
    await tools.archmax_raise({
      code: "fraud-hold",
      reason: `${orderId} is held for risk review; customer care must not act on it. Hand the request to the risk team.`,
    });
    return;
  }

  if (order.status !== "delivered") {
    const why = {
      cancelled: "it was cancelled, and cancelled orders are refunded in full when they are cancelled",
      shipped: "it is still with the carrier; a refund can be requested once it has arrived",
      processing: "it has not left the warehouse yet; the customer can cancel it instead",
    }[order.status] ?? `its status is "${order.status}"`;
    await decline(`${orderId} cannot be refunded now: ${why}.`);
    return;
  }

  const value = order.lines.reduce((sum, l) => sum + cents(l.qty * l.unit_price), 0) + cents(order.shipping_paid);
  const refunded = cents(order.refunded_to_date);
  if (refunded >= value) {
    await decline(`${orderId} has already been refunded in full (${euros(refunded)}).`);
    return;
  }

  const words = trigger === "email_reply" ? variables.body : variables.reason;
  if (typeof words !== "string" || words.trim() === "") {
    await decline(`The request for ${orderId} does not say what is wrong. Ask the customer what happened with the order.`);
    return;
  }

  const shipment = order.shipment;
  await tools.archmax_advance({
    to: "decide-refund",
    reason:
      `${orderId} for ${order.customer.name}: delivered ${shipment.delivered_on} by ${shipment.carrier} ${shipment.service}, ` +
      `${order.lines.length} line(s), order value ${euros(value)}, ${euros(refunded)} refunded so far.`,
  });
}
