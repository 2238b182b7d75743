/**
 * Requester gate: only a known customer may start a conversation.
 *
 * Takes the first email address of the first user message and looks it up in
 * skills/order-data/assets/orders.json. Vetoes when the message carries no
 * address, or when no order was placed from it; otherwise ok.
 */
import { ok, veto } from "@archmax-ai/harness/sandbox";

export default async function hook({ messages, tools }) {
  const orders = JSON.parse(await tools.readFile({ file_path: "skills/order-data/assets/orders.json" }));
  const first = messages.find((message) => message.role === "user")?.text ?? "";
  const email = first.match(/[\w.+-]+@[\w.-]+\.\w+/)?.[0]?.toLowerCase();
  if (!email) return veto("The request carries no email address to identify the customer.");
  if (!orders.some((order) => order.email === email)) return veto(`${email} is not in the order database.`);
  console.log(`requester ${email} is known`);
  return ok();
}
