/**
 * Book an approved payout
 *
 * Terminal: runs after finance approves. Builds the payout reference from
 * `order_id` and `amount` (in cents) and records it as `refund_ref`, the
 * return the manual trigger declares. It first tries the amount as a bare
 * number, which the return's type refuses, and logs that refusal. It also
 * logs whether the bridge offers archmax_advance (a terminal state has no
 * edge to take). Returning
 * without advancing completes the session.
 */
export default async function ({ variables, tools }) {
  console.log(`archmaxAdvance offered: ${Object.keys(tools).includes("archmaxAdvance")}`);
  const cents = Math.round(variables.amount * 100);
  try {
    await tools.archmaxSetVariables({ variables: { refund_ref: cents } });
  } catch (err) {
    console.log(`refused: ${err.message}`);
  }
  const ref = `RF-${variables.order_id}-${cents}`;
  console.log(await tools.archmax_set_variables({ variables: { refund_ref: ref } }));
  return { booked: ref };
}
