/**
 * Finish `orders-question`
 *
 * Written by `archmax migrate`: `orders-question` was a terminal state with an `after` check,
 * so the check now sits behind it and advances here when it passes. This terminal
 * code state decides nothing, so the session completes.
 */
export default async function () {}
