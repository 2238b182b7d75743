/**
 * Poll the supplier's drop folder (one listing too many)
 *
 * Lists scratchpad/ ten times in a row; settings.maxPtcCalls allows five
 * tool calls per run, so the sixth call rejects and the state fails.
 */
export default async function ({ tools }) {
  for (let i = 0; i < 10; i += 1) {
    await tools.ls({ path: "scratchpad" });
  }
  await tools.archmax_advance({ to: "report", reason: "The drop folder was listed." });
}
