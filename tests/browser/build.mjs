// Builds the page: the messages and service from ../../proto (buf + protoc-gen-es),
// then one browser bundle (esbuild) with connect-web, into dist/.
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const bin = join(here, "node_modules", ".bin");
execFileSync(join(bin, "buf"), ["generate"], {
  cwd: here,
  stdio: "inherit",
  env: { ...process.env, PATH: `${bin}:${process.env.PATH}` },
});
mkdirSync(join(here, "dist"), { recursive: true });
await esbuild.build({
  entryPoints: [join(here, "src", "page.js")],
  outfile: join(here, "dist", "page.js"),
  bundle: true,
  format: "esm",
  platform: "browser",
  target: "es2022",
  logLevel: "warning",
});
copyFileSync(join(here, "src", "index.html"), join(here, "dist", "index.html"));
