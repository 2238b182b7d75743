/**
 * Refund window and ceiling for one order
 *
 * Applies skills/refund-policy/assets/policy.json to one order in
 * skills/order-data/assets/orders.json. Inputs come from `args`:
 * `order_id`, `requested_on` (YYYY-MM-DD, the day the customer first asked),
 * `reason_code` and `delayed`. Left out, `order_id` and `requested_on` fall
 * back to the session variables of the same name, and `delayed` to
 * `args.variables.enrichment.delayed` (the enrich-order answer).
 *
 * For every line it works out the window (the policy's days for the line's
 * category, else the default), the last day the customer could ask, and
 * whether `requested_on` falls inside it. Given a reason code it also decides
 * whether the line is refundable: never after its window, never a gift card,
 * no goods at all for `late_delivery`, and a final-sale line only for a
 * reason that is our fault.
 *
 * Shipping is refundable when at least one line is still in its window and
 * either the delivery was late or every line is refundable for a reason that
 * is our fault. For a reason that deducts a return label (`changed_mind`) it
 * reads reference/shipping-rates.csv and takes the `return_label_eur` of the
 * order's carrier and service in the smallest band that fits `weight_kg`;
 * where the rate card cannot be read the label comes back `null` with a note.
 * `max_refund` is refundable goods plus refundable shipping minus the label,
 * capped at what has not been refunded yet and never below zero. All money is
 * summed in whole cents.
 *
 * The result (the script's last expression) is a plain object. A missing or
 * unknown input yields `{ error }` naming it instead of a partial answer.
 */

const ORDERS_PATH = "skills/order-data/assets/orders.json";
const POLICY_PATH = "skills/refund-policy/assets/policy.json";
const RATES_PATH = "reference/shipping-rates.csv";
const DAY_MS = 24 * 60 * 60 * 1000;

const vars = args.variables ?? {};
const orderId = args.order_id ?? vars.order_id;
const requestedOn = args.requested_on ?? vars.requested_on;
const reasonCode = args.reason_code ?? null;
const delayed =
  typeof args.delayed === "boolean" ? args.delayed : vars.enrichment?.delayed === true;

const toCents = (euros) => Math.round(Number(euros) * 100);
const toEuros = (cents) => cents / 100;

function dayNumber(iso) {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(String(iso ?? ""));
  return m ? Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])) / DAY_MS : null;
}

function isoDay(day) {
  return new Date(day * DAY_MS).toISOString().slice(0, 10);
}

async function readText(path) {
  const text = await tools.readFile({ file_path: path });
  if (typeof text !== "string" || /^Error\b/.test(text)) {
    throw new Error(typeof text === "string" ? text : `${path} returned no text`);
  }
  return text;
}

async function returnLabel(order) {
  let csv;
  try {
    csv = await readText(RATES_PATH);
  } catch (err) {
    return { amount: null, note: `${RATES_PATH} could not be read here (${err.message}).` };
  }
  const [header, ...rows] = csv.trim().split(/\r?\n/);
  const columns = header.split(",");
  const bands = rows
    .map((row) => Object.fromEntries(row.split(",").map((value, i) => [columns[i], value])))
    .filter((b) => b.carrier === order.shipment.carrier && b.service === order.shipment.service)
    .sort((a, b) => Number(a.max_kg) - Number(b.max_kg));
  const band = bands.find((b) => Number(b.max_kg) >= order.weight_kg);
  if (!band) {
    return {
      amount: null,
      note: `No ${order.shipment.carrier} ${order.shipment.service} band fits ${order.weight_kg} kg.`,
    };
  }
  return { amount: Number(band.return_label_eur), band: band.band, cents: toCents(band.return_label_eur) };
}

async function main() {
  if (!orderId) return { error: "No order_id: pass one, or run where the session has the variable." };
  const requestedDay = dayNumber(requestedOn);
  if (requestedDay === null) {
    return { error: `requested_on must be a YYYY-MM-DD date, got ${JSON.stringify(requestedOn)}.` };
  }

  const orders = JSON.parse(await readText(ORDERS_PATH));
  const policy = JSON.parse(await readText(POLICY_PATH));
  const order = orders.find((o) => o.order_id === orderId);
  if (!order) return { error: `There is no order ${orderId} in ${ORDERS_PATH}.` };

  const deliveredDay = dayNumber(order.shipment?.delivered_on);
  if (deliveredDay === null) {
    return { error: `${orderId} has no delivery date (status ${order.status}); windows start at delivery.` };
  }

  const reason = reasonCode === null ? null : policy.reason_codes[reasonCode];
  if (reasonCode !== null && !reason) {
    return {
      error: `Unknown reason_code "${reasonCode}"; use one of ${Object.keys(policy.reason_codes).join(", ")}.`,
    };
  }

  const lines = order.lines.map((line) => {
    const windowDays = policy.window_days[line.category] ?? policy.window_days.default;
    const lastDay = deliveredDay + windowDays;
    const inWindow = requestedDay <= lastDay;
    const cents = toCents(line.qty * line.unit_price);
    let refundable = null;
    let why = "pass reason_code to judge this line";
    if (reason) {
      if (!inWindow) [refundable, why] = [false, `asked after the window closed on ${isoDay(lastDay)}`];
      else if (policy.never_refundable_categories.includes(line.category))
        [refundable, why] = [false, `${line.category} is never refunded`];
      else if (!reason.goods) [refundable, why] = [false, `${reasonCode} refunds no goods`];
      else if (line.final_sale && !reason.our_fault)
        [refundable, why] = [false, "final sale: refunded only when the fault is ours"];
      else [refundable, why] = [true, "refundable"];
    }
    return {
      sku: line.sku,
      name: line.name,
      category: line.category,
      value: toEuros(cents),
      window_days: windowDays,
      last_day_to_ask: isoDay(lastDay),
      in_window: inWindow,
      refundable,
      why,
      cents,
    };
  });

  const alreadyRefunded = toCents(order.refunded_to_date);
  const orderValue = lines.reduce((sum, l) => sum + l.cents, 0) + toCents(order.shipping_paid);
  const report = {
    order_id: order.order_id,
    currency: policy.currency,
    requested_on: requestedOn,
    delivered_on: order.shipment.delivered_on,
    reason_code: reasonCode,
    delayed,
    lines: lines.map(({ cents, ...rest }) => rest),
    already_refunded: toEuros(alreadyRefunded),
  };
  if (!reason) {
    return { ...report, max_refund: null, note: "Pass reason_code to get refundability and max_refund." };
  }

  const goodsCents = lines.filter((l) => l.refundable).reduce((sum, l) => sum + l.cents, 0);
  const anyInWindow = lines.some((l) => l.in_window);
  const everyLineOurFault = reason.our_fault && lines.every((l) => l.refundable);
  const shippingRefundable = anyInWindow && (delayed || everyLineOurFault);
  const shippingWhy = !anyInWindow
    ? "every window has closed"
    : delayed
      ? "the delivery was late"
      : everyLineOurFault
        ? "every line is refundable for a reason that is our fault; refund it only with all of them"
        : "only refunded with every line for our fault, or for a late delivery";

  let label = null;
  if (reason.return_label_deducted && goodsCents > 0) label = await returnLabel(order);

  const beforeCap =
    goodsCents + (shippingRefundable ? toCents(order.shipping_paid) : 0) - (label?.cents ?? 0);
  const maxCents = Math.max(0, Math.min(beforeCap, orderValue - alreadyRefunded));

  return {
    ...report,
    refundable_goods: toEuros(goodsCents),
    shipping: { paid: order.shipping_paid, refundable: shippingRefundable, why: shippingWhy },
    return_label: label && { amount: label.amount, band: label.band ?? null, note: label.note ?? null },
    max_refund: toEuros(maxCents),
  };
}

const result = await main();
result;
