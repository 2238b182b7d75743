/** Route a refund: small ones are approved, the rest go to a person. */
export default async function ({ variables, tools }) {
  const next = variables.total > 100 ? "review-refund" : "approve-refund";
  if (variables.total > 1000) {
    // A large refund is never closed from here.
    await tools.archmax_advance({ to: "closed", reason: "too large" });
  } else if (variables.total > 100) {
    await tools.archmax_advance({ to: "reveiw-refund", reason: "needs a person" });
  } else {
    await tools.archmax_advance({ to: next, reason: "checked" });
  }
}
