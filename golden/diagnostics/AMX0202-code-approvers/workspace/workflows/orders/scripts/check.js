/**
 * Order check
 *
 * Reads nothing and always advances to `answer`; it stands in for a real
 * check in this example.
 */
export default async function ({ tools }) {
  await tools.archmax_advance({ to: "answer", reason: "The order is known." });
}
