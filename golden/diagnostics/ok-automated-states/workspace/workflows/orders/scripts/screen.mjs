/**
 * Screen a refund request
 *
 * Reads `order_id` from the variables. An id shaped like ORD-<digits> advances
 * to `draft`; anything else advances to `escalate` with the reason.
 */
import { CodeStateInput } from "@archmax-ai/harness/sandbox";

/** @param {CodeStateInput} input */
export default async function ({ variables, tools }) {
  const id = String(variables.order_id ?? "");
  if (/^ORD-[0-9]+$/.test(id)) {
    await tools.archmax_advance({ to: "draft", reason: `Order ${id} may be refunded.` });
  } else {
    await tools.archmax_advance({ to: "escalate", reason: `'${id}' is not an order id.` });
  }
}
