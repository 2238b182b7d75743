const fs = require("fs");

export default async function check({ tools }) {
  fs.existsSync("x");
  await tools.archmax_advance({ to: "closed", reason: "checked" });
}
