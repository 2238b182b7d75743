/**
 * Check a quote's arithmetic
 *
 * Reads scratchpad/quote.md, sums every `- <qty> x <name> @ <price>` line in
 * whole cents and compares the sum with the `Total: <amount> EUR` line.
 *
 * A matching total advances to `send`. A missing or wrong total sends the
 * quote back to `draft` with the figure it should show, unless the trail
 * already holds two code send-backs to `draft`; then it advances to
 * `escalate`. Before deciding it logs how many send-backs it found and the
 * last runtime note in the history, so a run shows what the drafter read.
 */
const QUOTE = "scratchpad/quote.md";
const MAX_SEND_BACKS = 2;
const cents = (text) => Math.round(Number(text) * 100);
const euros = (amount) => (amount / 100).toFixed(2);

export default async function ({ state, tools }) {
  const quote = await tools.readFile({ file_path: QUOTE });
  const lines = [...quote.matchAll(/^- (\d+) x (.+?) @ (\d+(?:\.\d+)?)\s*$/gm)];
  const sum = lines.reduce((total, [, qty, , price]) => total + Number(qty) * cents(price), 0);
  const stated = /^Total: (\d+(?:\.\d+)?) EUR\s*$/m.exec(quote);

  const history = JSON.parse(await tools.archmax_get_history());
  const sendBacks = history.trail.filter((step) => step.kind === "code" && step.to === "draft").length;
  const notes = history.messages.filter((m) => m.role === "runtime");
  console.log(`${state}: ${lines.length} line(s), ${sendBacks} earlier send-back(s)`);
  if (notes.length > 0) console.log(`last note (${notes.at(-1).note}): ${notes.at(-1).text}`);

  if (stated && cents(stated[1]) === sum) {
    await tools.archmax_advance({ to: "send", reason: `The total ${euros(sum)} EUR matches ${lines.length} line(s).` });
    return;
  }
  const problem = stated
    ? `The total says ${stated[1]} EUR but the lines add up to ${euros(sum)} EUR; correct the Total line.`
    : `There is no "Total: <amount> EUR" line; add one showing ${euros(sum)} EUR.`;
  if (sendBacks >= MAX_SEND_BACKS) {
    await tools.archmax_advance({ to: "escalate", reason: `Sent back ${sendBacks} times and still wrong. ${problem}` });
    return;
  }
  await tools.archmax_advance({ to: "draft", reason: problem });
}
