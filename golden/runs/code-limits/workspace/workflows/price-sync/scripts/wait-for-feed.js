/**
 * Wait for the supplier feed (busy-waits; never returns)
 *
 * Polls for the feed in a loop with no exit, so only settings.timeoutMs
 * stops it and the state fails.
 */
export default async function () {
  let polls = 0;
  while (true) {
    polls += 1;
  }
}
