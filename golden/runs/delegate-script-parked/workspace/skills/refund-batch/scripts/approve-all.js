/**
 * One refund-approval sub-workflow per refund, run together.
 * A call whose child stops for a person rejects: a script cannot wait.
 */
const refunds = args.variables.refunds ?? [];
const settled = await Promise.allSettled(
  refunds.map((refund) =>
    tools.archmaxWorkflowRefundApproval({ order_id: refund.order_id, amount_eur: refund.amount_eur }),
  ),
);
const result = settled.map((outcome, index) => ({
  order_id: refunds[index].order_id,
  approved: outcome.status === "fulfilled" ? JSON.parse(outcome.value).returns.approved : null,
  error: outcome.status === "rejected" ? String(outcome.reason?.message ?? outcome.reason) : null,
}));
result;
