/**
 * Tenancy gate: a requester reaches only their own company's orders.
 *
 * Binds the requester's email to the companies whose orders carry it, then
 * vetoes a request that names an order id (`ORD-…`) of another company.
 * A database that cannot be read vetoes too (fail-closed).
 */
import { ok, veto } from "@archmax-ai/harness/sandbox";

export default async function hook({ messages, tools }) {
  let orders;
  try {
    orders = JSON.parse(await tools.readFile({ file_path: "skills/order-data/assets/orders.json" }));
  } catch {
    return veto("The order database could not be read, so tenancy cannot be checked.");
  }
  const first = messages.find((message) => message.role === "user")?.text ?? "";
  const email = (first.match(/[\w.+-]+@[\w.-]+\.\w+/)?.[0] ?? "").toLowerCase();
  const own = new Set(orders.filter((order) => order.email === email).map((order) => order.customer));
  const named = (first.match(/\bORD-\d+\b/gi) ?? []).map((id) => id.toUpperCase());
  const foreign = orders.filter((order) => named.includes(order.id) && !own.has(order.customer)).map((order) => order.id);
  if (foreign.length > 0) return veto(`${email} may not see ${foreign.join(", ")}: only your own company's orders.`);
  return ok();
}
