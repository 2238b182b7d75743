/**
 * Log why the stock check failed
 *
 * Terminal: reads the history and logs the last `error` runtime note, the
 * failure the apologising state was told about, then completes the session.
 */
export default async function ({ tools }) {
  const { messages } = JSON.parse(await tools.archmax_get_history());
  const errors = messages.filter((m) => m.role === "runtime" && m.note === "error");
  console.log(`incident: ${errors.at(-1)?.text ?? "no error note"}`);
}
