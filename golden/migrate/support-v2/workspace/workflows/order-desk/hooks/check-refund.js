/**
 * Refund policy check: the agent may not record a refund the policy forbids.
 *
 * Reads scratchpad/refund.json ({ orderId, decision }) and the order records,
 * derives the decision (approved only for a delivered or delayed order) and
 * compares. A missing or malformed ticket is a veto; a wrong decision is a
 * correction naming the right one; otherwise ok.
 */
export default async function hook({ tools, to }) {
  let refund;
  try {
    refund = JSON.parse(await tools.readFile({ file_path: "scratchpad/refund.json" }));
  } catch (error) {
    return veto(`scratchpad/refund.json could not be read (${error.message}): write it before moving on.`);
  }
  const orders = JSON.parse(await tools.readFile({ file_path: "skills/order-data/assets/orders.json" }));
  const order = orders.find((candidate) => candidate.id === refund.orderId);
  const derived = order && ["delivered", "delayed"].includes(order.status) ? "approved" : "denied";
  console.log(`moving to ${to}: recorded ${refund.decision}, policy says ${derived}`);
  if (refund.decision === derived) return ok();
  return correct(`The policy requires "${derived}" for ${refund.orderId}: update scratchpad/refund.json.`);
}
