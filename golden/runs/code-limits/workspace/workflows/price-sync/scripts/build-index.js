/**
 * Build the price index (allocates without bound)
 *
 * Keeps a one-megabyte buffer per supplier page in an index it never trims, so it
 * reaches settings.memoryLimitBytes within a few dozen allocations (well inside the
 * time budget, however busy the machine) and the state fails.
 */
export default async function () {
  const index = [];
  for (let page = 0; ; page += 1) {
    index.push(new Uint8Array(1024 * 1024).fill(page % 256));
  }
}
