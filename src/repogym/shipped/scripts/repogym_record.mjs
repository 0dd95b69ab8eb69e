// Record, at build time, the files a repogym verifier trusts: the Node twin of
// repogym_record.py for images without Python (Node >= 16, no dependencies).
//
//   node repogym_record.mjs --record KEY WORKDIR RUNNER
//
// writes /usr/lib/repogym/record.txt in sha256sum format (node, bash, sha256sum and every code
// file of the test runner's packages under WORKDIR/node_modules), plus comment lines: "node"
// (the interpreter the verifier should run), "env" (the build's environment: the tests run with
// it) and "nopreload" when /etc/ld.so.preload does not exist; record.mac holds
// sha256(KEY + record + KEY). KEY is in the Dockerfile's RUN line and the hidden tests only.

import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";

const RECORD_DIR = "/usr/lib/repogym";
const NODE_PACKAGES = [
  "jest", "jest-cli", "jest-circus", "jest-runner", "jest-runtime", "jest-jasmine2", "@jest",
  "expect", "vitest", "@vitest", "mocha",
];
const CODE_EXT = [".py", ".js", ".cjs", ".mjs", ".json", ".so", ".node"];
const BUILD_ONLY_ENV = new Set(["PWD", "OLDPWD", "SHLVL", "_", "HOSTNAME"]);
const PRELOAD = "/etc/ld.so.preload";

function sha256(file) {
  return crypto.createHash("sha256").update(fs.readFileSync(file)).digest("hex");
}

function which(tool) {
  for (const dir of (process.env.PATH || "").split(":")) {
    if (!dir) continue;
    const candidate = path.join(dir, tool);
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      if (fs.statSync(candidate).isFile()) return candidate;
    } catch {
      // not here
    }
  }
  return null;
}

function nodeFiles(workdir) {
  const out = [];
  const modules = path.join(workdir, "node_modules");
  const visit = (dir, top) => {
    let entries;
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const e of entries) {
      const full = path.join(dir, e.name);
      if (e.isDirectory()) {
        if (e.name !== "node_modules" || dir === top) visit(full, top);
      } else if (e.isFile() && CODE_EXT.some((x) => e.name.endsWith(x))) {
        out.push(full);
      }
    }
  };
  for (const name of NODE_PACKAGES) {
    const top = path.join(modules, name);
    try {
      if (fs.statSync(top).isDirectory()) visit(top, top);
    } catch {
      // not installed
    }
  }
  return out;
}

function recordLines(workdir) {
  const files = [];
  const names = [];
  for (const tool of ["python3", "python", "bash", "sha256sum", "node"]) {
    const found = which(tool);
    if (found) files.push(fs.realpathSync(found));
  }
  files.push(fs.realpathSync(process.execPath));
  names.push(`# node ${fs.realpathSync(process.execPath)}`);
  const env = {};
  for (const key of Object.keys(process.env).sort()) {
    if (!BUILD_ONLY_ENV.has(key)) env[key] = process.env[key];
  }
  names.push(`# env ${JSON.stringify(env)}`);
  if (workdir) files.push(...nodeFiles(workdir));
  if (fs.existsSync(PRELOAD)) files.push(PRELOAD);
  else names.push("# nopreload");
  const lines = ["# repogym integrity record 1", ...names];
  const seen = new Set();
  for (const file of files) {
    if (seen.has(file) || file.includes("\n")) continue;
    try {
      if (!fs.statSync(file).isFile()) continue;
    } catch {
      continue;
    }
    seen.add(file);
    lines.push(`${sha256(file)}  ${file}`);
  }
  return lines;
}

function main(argv) {
  if (argv.length >= 4 && argv[2] === "--record") {
    const key = argv[3];
    const workdir = argv[4] || "";
    const data = Buffer.from(recordLines(workdir).join("\n") + "\n", "utf8");
    fs.mkdirSync(RECORD_DIR, { recursive: true });
    fs.writeFileSync(path.join(RECORD_DIR, "record.txt"), data);
    const mac = crypto
      .createHash("sha256")
      .update(Buffer.concat([Buffer.from(key), data, Buffer.from(key)]))
      .digest("hex");
    fs.writeFileSync(path.join(RECORD_DIR, "record.mac"), mac + "\n");
    return 0;
  }
  process.stderr.write("usage: repogym_record.mjs --record KEY [WORKDIR [RUNNER]]\n");
  return 2;
}

process.exitCode = main(process.argv);
