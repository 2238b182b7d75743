export default async function check({ tools }) {
  await tools.archmax_advance({ to: "closed", reason: "checked" });
}
