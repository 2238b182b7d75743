/** Check an order total. */
export default async function ({ variables, tools }) {
  if (variables.total > 100 {
    await tools.archmax_advance({ to: "answer", reason: "large order" });
  }
}
