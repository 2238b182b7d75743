/**
 * Build the price index (allocates without bound)
 *
 * Appends ever larger rows to an index it never trims, so it runs into
 * settings.memoryLimitBytes and the state fails.
 */
export default async function () {
  const index = [];
  for (let i = 0; ; i += 1) {
    index.push("SKU-".repeat(1024) + i);
  }
}
