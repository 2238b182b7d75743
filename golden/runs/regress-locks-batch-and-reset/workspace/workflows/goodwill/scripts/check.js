/**
 * Check a goodwill refund
 *
 * Only this state writes `verified`. A refund already verified passes; one
 * of at most 50 EUR is verified here and passes; anything more goes back to
 * draft with the limit named.
 */
export default async function ({ variables, tools }) {
  if (variables.verified === true) {
    await tools.archmaxAdvance({ to: "pay", reason: "the refund was verified" });
    return;
  }
  const amount = Number(variables.refund_eur);
  if (amount <= 50) {
    await tools.archmaxSetVariables({ variables: { verified: true } });
    await tools.archmaxAdvance({ to: "pay", reason: `${amount} EUR is within the 50 EUR goodwill limit` });
  } else {
    await tools.archmaxAdvance({ to: "draft", reason: `${amount} EUR is over the 50 EUR goodwill limit` });
  }
}
