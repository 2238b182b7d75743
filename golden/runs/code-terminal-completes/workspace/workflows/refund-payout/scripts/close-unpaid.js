/**
 * Close a refund request unpaid
 *
 * Terminal: logs the order and returns without recording `refund_ref`, so the
 * session is held to the trigger's declared return and cannot complete.
 */
export default async function ({ variables }) {
  console.log(`closing ${variables.order_id} without a payout`);
}
