/**
 * Check the recorded refund decision against the policy
 *
 * Runs each time decide-refund advances. It reads the variables `order_id`,
 * `requested_on`, `decision`, `reason_code`, `refund_amount` and
 * `enrichment` (the enrich-order answer, of which only `delayed` matters
 * here), then loads skills/order-data/assets/orders.json,
 * skills/refund-policy/assets/policy.json and, for a reason that deducts a
 * return label, reference/shipping-rates.csv. This state enables the
 * refund-policy bundle and the reference mount for itself; the agent's own
 * grants do not carry over.
 *
 * It re-derives the most the policy allows (`max_refund`) without trusting
 * the agent's arithmetic: per line, the window (category days, else the
 * default) measured to `requested_on`, never a gift card, no goods for
 * `late_delivery`, a final-sale line only for a reason that is our fault;
 * shipping when a line is still in its window and the delivery was late or
 * every line is refundable for a reason that is our fault; minus the return
 * label for `changed_mind`; capped at what is not yet refunded. Money is
 * compared in whole cents. It then checks:
 *
 *   - `decision` is full, partial or deny and `reason_code` is a policy code;
 *   - `refund_amount` is a number of at least 0 with at most two decimals;
 *   - deny means 0, and is the only decision when `max_refund` is 0;
 *   - full means exactly `max_refund`; partial means more than 0 and less;
 *   - scratchpad/refund.md exists and names the order and the amount;
 *   - scratchpad/customer-reply.md exists, names the order, and states the
 *     amount when one is refunded (64.00 or 64,00 both count).
 *
 * Outcomes: every rule holds, it advances to `review`. Some rule fails, it
 * advances back to `decide-refund` with a reason beginning "Off policy:" that
 * lists each failure and the expected figure. If the trail already holds two
 * such send-backs, it advances to `escalate` instead. A data file that cannot
 * be read makes it throw, which routes the session through `on_error`.
 */
import type { CodeStateInput } from "@archmax-ai/harness/code-state";

const ORDERS_PATH = "skills/order-data/assets/orders.json";
const POLICY_PATH = "skills/refund-policy/assets/policy.json";
const RATES_PATH = "reference/shipping-rates.csv";
const MEMO_PATH = "scratchpad/refund.md";
const REPLY_PATH = "scratchpad/customer-reply.md";
const SEND_BACK_PREFIX = "Off policy:";
const MAX_SEND_BACKS = 2;
const DAY_MS = 24 * 60 * 60 * 1000;

const toCents = (value) => Math.round(Number(value) * 100);
const show = (cents) => (cents / 100).toFixed(2);

function dayNumber(iso) {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(String(iso ?? ""));
  return m ? Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])) / DAY_MS : null;
}

/** Mentions an amount in either decimal notation: 64.00 or 64,00. */
function mentionsAmount(text, cents) {
  const dotted = show(cents);
  return text.includes(dotted) || text.includes(dotted.replace(".", ","));
}

/** @param {CodeStateInput} input */
export default async function ({ variables, tools }) {
  async function readText(path, { optional = false } = {}) {
    let text;
    try {
      text = await tools.readFile({ file_path: path });
    } catch (err) {
      if (optional) return null;
      throw new Error(`check-decision could not read ${path}: ${err.message}`);
    }
    if (typeof text !== "string" || /^Error\b/.test(text)) {
      if (optional) return null;
      throw new Error(`check-decision could not read ${path}: ${text}`);
    }
    return text;
  }

  const orders = JSON.parse(await readText(ORDERS_PATH));
  const policy = JSON.parse(await readText(POLICY_PATH));
  const order = orders.find((o) => o.order_id === variables.order_id);
  if (!order) throw new Error(`order ${variables.order_id} vanished from ${ORDERS_PATH} after screening`);

  const problems = [];
  const decision = variables.decision;
  const reasonCode = variables.reason_code;
  const amount = variables.refund_amount;
  const delayed = variables.enrichment?.delayed === true;

  if (!policy.decisions.includes(decision)) {
    problems.push(`decision is ${JSON.stringify(decision)}; record one of ${policy.decisions.join(", ")}.`);
  }
  const reason = policy.reason_codes[reasonCode];
  if (!reason) {
    problems.push(
      `reason_code is ${JSON.stringify(reasonCode)}; record one of ${Object.keys(policy.reason_codes).join(", ")}.`,
    );
  }
  const amountIsValid =
    typeof amount === "number" && Number.isFinite(amount) && amount >= 0 && Math.abs(amount * 100 - Math.round(amount * 100)) < 1e-6;
  if (!amountIsValid) {
    problems.push(`refund_amount is ${JSON.stringify(amount)}; record a number of euros, at least 0, with at most two decimals.`);
  }

  let maxCents = null;
  if (reason) {
    const requestedDay = dayNumber(variables.requested_on);
    const deliveredDay = dayNumber(order.shipment?.delivered_on);
    if (requestedDay === null || deliveredDay === null) {
      throw new Error(`requested_on (${variables.requested_on}) or the delivery date of ${order.order_id} is not a date`);
    }
    const lines = order.lines.map((line) => {
      const windowDays = policy.window_days[line.category] ?? policy.window_days.default;
      const inWindow = requestedDay <= deliveredDay + windowDays;
      const refundable =
        inWindow &&
        !policy.never_refundable_categories.includes(line.category) &&
        reason.goods &&
        (!line.final_sale || reason.our_fault);
      return { cents: toCents(line.qty * line.unit_price), inWindow, refundable };
    });
    const goods = lines.filter((l) => l.refundable).reduce((sum, l) => sum + l.cents, 0);
    const shippingRefundable =
      lines.some((l) => l.inWindow) && (delayed || (reason.our_fault && lines.every((l) => l.refundable)));

    let label = 0;
    if (reason.return_label_deducted && goods > 0) {
      const [header, ...rows] = (await readText(RATES_PATH)).trim().split(/\r?\n/);
      const columns = header.split(",");
      const band = rows
        .map((row) => Object.fromEntries(row.split(",").map((value, i) => [columns[i], value])))
        .filter((b) => b.carrier === order.shipment.carrier && b.service === order.shipment.service)
        .sort((a, b) => Number(a.max_kg) - Number(b.max_kg))
        .find((b) => Number(b.max_kg) >= order.weight_kg);
      if (!band) throw new Error(`no return label band fits ${order.order_id} (${order.weight_kg} kg)`);
      label = toCents(band.return_label_eur);
    }

    const value = lines.reduce((sum, l) => sum + l.cents, 0) + toCents(order.shipping_paid);
    const open = value - toCents(order.refunded_to_date);
    const beforeCap = goods + (shippingRefundable ? toCents(order.shipping_paid) : 0) - label;
    maxCents = Math.max(0, Math.min(beforeCap, open));
  }

  const cents = amountIsValid ? Math.round(amount * 100) : null;
  if (maxCents !== null && cents !== null && policy.decisions.includes(decision)) {
    if (decision === "deny" && cents !== 0) {
      problems.push(`a deny refunds nothing, but refund_amount is ${show(cents)}.`);
    }
    if (decision !== "deny" && maxCents === 0) {
      problems.push(`the policy allows nothing for ${reasonCode} on this order (max_refund 0.00), so the decision is deny.`);
    }
    if (decision === "full" && maxCents > 0 && cents !== maxCents) {
      problems.push(`a full refund is exactly max_refund ${show(maxCents)}, not ${show(cents)}.`);
    }
    if (decision === "partial" && maxCents > 0 && !(cents > 0 && cents < maxCents)) {
      problems.push(`a partial refund is more than 0.00 and less than max_refund ${show(maxCents)}, not ${show(cents)}.`);
    }
  }

  const memo = await readText(MEMO_PATH, { optional: true });
  if (memo === null) {
    problems.push(`${MEMO_PATH} is missing; write the decision memo there.`);
  } else {
    if (!memo.includes(order.order_id)) problems.push(`${MEMO_PATH} does not name ${order.order_id}.`);
    if (cents !== null && !mentionsAmount(memo, cents)) problems.push(`${MEMO_PATH} does not state the amount ${show(cents)}.`);
  }

  const reply = await readText(REPLY_PATH, { optional: true });
  if (reply === null) {
    problems.push(`${REPLY_PATH} is missing; draft the customer's reply there.`);
  } else {
    if (!reply.includes(order.order_id)) problems.push(`${REPLY_PATH} does not name ${order.order_id}.`);
    if (cents !== null && cents > 0 && !mentionsAmount(reply, cents)) {
      problems.push(`${REPLY_PATH} does not tell the customer the amount ${show(cents)}.`);
    }
  }

  if (problems.length === 0) {
    const what =
      decision === "deny"
        ? `Denying ${order.order_id} (${reasonCode})`
        : `A ${decision} refund of ${show(cents)} EUR for ${order.order_id} (${reasonCode})`;
    await tools.archmax_advance({
      to: "review",
      reason: `${what} matches the policy; max_refund is ${show(maxCents)} EUR.`,
    });
    return;
  }

  const history = JSON.parse(await tools.archmax_get_history());
  const sendBacks = (history.trail ?? []).filter(
    (step) => step.kind === "code" && step.to === "decide-refund" && String(step.reason ?? "").startsWith(SEND_BACK_PREFIX),
  ).length;
  if (sendBacks >= MAX_SEND_BACKS) {
    await tools.archmax_advance({
      to: "escalate",
      reason: `The decision for ${order.order_id} was sent back ${sendBacks} times and still breaks the policy: ${problems.join(" ")}`,
    });
    return;
  }
  await tools.archmax_advance({ to: "decide-refund", reason: `${SEND_BACK_PREFIX} ${problems.join(" ")}` });
}
