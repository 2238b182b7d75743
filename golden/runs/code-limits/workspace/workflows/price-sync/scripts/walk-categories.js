/**
 * Walk the category tree (recurses without a base case)
 *
 * Each category visits its child, and no category is a leaf, so the stack
 * overflows and the state fails.
 */
function visit(depth) {
  return visit(depth + 1) + 1;
}

export default async function () {
  visit(0);
}
