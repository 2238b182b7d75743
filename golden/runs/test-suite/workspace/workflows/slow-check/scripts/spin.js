/**
 * Spin
 *
 * Loops until the sandbox stops it, so the case runs past its time budget.
 */
export default async function ({ tools }) {
  for (;;) {}
}
