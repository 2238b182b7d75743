/**
 * The expense policy: a total over 100 needs a manager's approval; anything else
 * is paid at once. Reads `amount`, which read-receipt locked.
 */
export default async function ({ variables, tools }) {
  const amount = Number(variables.amount);
  if (amount > 100) {
    await tools.archmaxAdvance({ to: "approve", reason: `${amount.toFixed(2)} is over the limit of 100.` });
  } else {
    await tools.archmaxAdvance({ to: "pay", reason: `${amount.toFixed(2)} is within the limit.` });
  }
}
