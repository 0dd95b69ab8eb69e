// Verifier of a repogym runtime task of a JavaScript runner (jest, vitest, mocha, node --test),
// for images without Python: Node >= 16, no dependencies. test.sh starts it instead of
// verifier.py when no Python interpreter is there (or when REPOGYM_VERIFIER=node).
//
// It follows verifier.py's contract (docs/reward-contract.md):
//   1. Integrity: the record's MAC (key in /tests/integrity.key), the sha256 of every recorded
//      file (node, bash, sha256sum, the runner's node_modules packages), no new loader preload
//      list. test.sh has checked the same with sha256sum before starting this.
//   2. Test infrastructure reset: hidden copies (files/) written over the working tree, paths the
//      task deletes removed, test infrastructure the agent added removed (the rule of infra.py,
//      ported below), a changed infrastructure file without a hidden copy is a tamper.
//   3. NOT DONE HERE: the tamper scan of changed source files (tamper.py) needs Python; the
//      details say so ("tamper_scan").
//   4. Run the test command with the environment recorded at build time; results come from the
//      runner's JSON report written to a file of ours (jest --json --outputFile, mocha's json
//      reporter with output=, vitest --reporter=json --outputFile) or from the result lines of
//      repogym's node:test reporter (the recipe's command carries it); a run that ends without
//      its report pays nothing.
//   4b. Canaries (tests/canaries.json): a few copies of the task's tests with one expectation
//      contradicted are planted in the hidden test files for each run, chosen, named and placed
//      with this process's own randomness; one that does not fail is a tamper (as verifier.py).
//   5. Grade: reward_mode "resolved" (1 when every F2P and P2P test passes) or "graded"
//      (f2p_rate x p2p_rate) into reward.txt and reward-details.json.
// "--results FILE" (generation) runs 1-4 and writes the raw results as JSON instead.

import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const LOGS = process.env.REPOGYM_VERIFIER_LOGS || "/logs/verifier";
const RECORD = "/usr/lib/repogym/record.txt";
const VERSION = "repogym runtime verifier 2 (node)";
const UNSAFE_ENV = [
  "BASH_ENV", "ENV", "PYTHONSTARTUP", "PYTHONINSPECT", "PYTHONHOME", "PYTEST_ADDOPTS",
  "PYTEST_PLUGINS", "LD_PRELOAD", "LD_AUDIT", "NODE_OPTIONS", "PERL5OPT", "RUBYOPT",
  "JAVA_TOOL_OPTIONS",
];
const DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
const MAX_MESSAGE = 300;
const CUT_SHORT = "log cut short";

function load(name, fallback) {
  const file = path.join(HERE, name);
  if (fallback !== undefined && !fs.existsSync(file)) return fallback;
  return JSON.parse(fs.readFileSync(file, "utf8"));
}

function write(name, payload) {
  fs.writeFileSync(path.join(LOGS, name), payload);
}

function sha256File(file) {
  const hash = crypto.createHash("sha256");
  const fd = fs.openSync(file, "r");
  try {
    const buf = Buffer.alloc(1 << 20);
    for (;;) {
      const n = fs.readSync(fd, buf, 0, buf.length, null);
      if (n <= 0) break;
      hash.update(buf.subarray(0, n));
    }
  } finally {
    fs.closeSync(fd);
  }
  return hash.digest("hex");
}

function isLink(p) {
  try {
    return fs.lstatSync(p).isSymbolicLink();
  } catch {
    return false;
  }
}

function lexists(p) {
  try {
    fs.lstatSync(p);
    return true;
  } catch {
    return false;
  }
}

// ------------------------------------------------------------------------------- integrity

function readRecord() {
  let data;
  try {
    data = fs.readFileSync(RECORD);
  } catch {
    return null;
  }
  const comments = [];
  const files = [];
  for (const line of data.toString("utf8").split("\n")) {
    if (line.startsWith("#")) comments.push(line.slice(2));
    else if (line.includes("  ")) {
      const i = line.indexOf("  ");
      files.push([line.slice(0, i), line.slice(i + 2)]);
    }
  }
  return { data, comments, files };
}

function checkIntegrity(sha256Checked) {
  let key;
  try {
    key = fs.readFileSync(path.join(HERE, "integrity.key"), "utf8").trim();
  } catch {
    return [[], null]; // a task made before integrity records
  }
  const record = readRecord();
  if (record === null) return [[`the integrity record (${RECORD}) is missing`], null];
  let mac = "";
  try {
    mac = fs.readFileSync(RECORD.slice(0, -".txt".length) + ".mac", "utf8").trim();
  } catch {
    mac = "";
  }
  const want = crypto
    .createHash("sha256")
    .update(Buffer.concat([Buffer.from(key), record.data, Buffer.from(key)]))
    .digest("hex");
  if (mac !== want) return [["the integrity record was changed after the build"], null];
  const problems = [];
  // This program's own interpreter was checked by test.sh before it ran (re-hashing it from
  // inside proves nothing).
  const self = sha256Checked ? fs.realpathSync(process.execPath) : null;
  for (const [digest, file] of record.files) {
    if (file === self) continue;
    try {
      if (sha256File(file) !== digest) problems.push(`changed after the build: ${file}`);
    } catch {
      problems.push(`missing since the build: ${file}`);
    }
  }
  let env = null;
  if (record.comments.includes("nopreload") && fs.existsSync("/etc/ld.so.preload")) {
    problems.push("a loader preload list (/etc/ld.so.preload) appeared after the build");
  }
  for (const line of record.comments) {
    const space = line.indexOf(" ");
    const kind = space < 0 ? line : line.slice(0, space);
    const rest = space < 0 ? "" : line.slice(space + 1);
    if (kind === "env") env = JSON.parse(rest);
    else if (kind === "site" || kind === "hooks") {
      const entry = JSON.parse(rest);
      let names;
      try {
        names = fs.readdirSync(entry.dir);
      } catch {
        continue;
      }
      const wanted =
        kind === "site"
          ? (n) => [".pth", ".dist-info", ".egg-info", ".egg-link"].some((s) => n.endsWith(s))
          : (n) => n === "sitecustomize.py" || n === "usercustomize.py";
      for (const name of names.filter(wanted).sort()) {
        if (!entry.names.includes(name)) {
          problems.push(`new start-up file since the build: ${entry.dir}/${name}`);
        }
      }
    }
  }
  return [problems.slice(0, 20), env];
}

// ------------------------------------------------------ test infrastructure (infra.py's rule)

const TEST_DIRS = new Set([
  "test", "tests", "__tests__", "spec", "testing", "testdata", "__snapshots__", "__mocks__",
]);
const TEST_FILE_RE =
  /^(?:test_.+\.py|.+_test\.py|conftest\.py|tests\.py|.+_test\.go|.+\.(?:test|spec)\.(?:[cm]?[jt]sx?)|.+_(?:spec|test)\.rb)$/;
const CONFIG_NAMES = new Set([
  "pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml", "noxfile.py",
  "package.json", "setupTests.js", "setupTests.ts", "sitecustomize.py", "usercustomize.py",
]);
const CONFIG_RE =
  /^(?:(?:jest|vitest|vite|vitest\.workspace|babel|karma|rollup|webpack|tsup|esbuild)\.config\..+|tsconfig(?:\.[\w-]+)*\.json|\.swcrc|(?:jest|vitest|test)\.setup\..+|(?:jest|test)-setup\..+|\.mocharc.*|\.babelrc.*|.+\.pth|.+\.egg-link)$/s;
const META_DIR_RE = /^.+\.(?:egg-info|dist-info)$/s;
const SHADOW_NAMES = new Set(["pytest", "_pytest", "pluggy", "py", "unittest", "site"]);
const SKIP_DIRS = new Set([
  ".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", "site-packages", ".tox",
  ".nox", ".pytest_cache", ".mypy_cache",
]);

function trimSlashes(p) {
  return p.replace(/^\/+|\/+$/g, "");
}

export function isTestPath(rel) {
  const parts = trimSlashes(rel).split("/");
  for (const part of parts.slice(0, -1)) {
    const low = part.toLowerCase();
    if (TEST_DIRS.has(low) || low.endsWith(".test") || low.endsWith(".tests")) return true;
  }
  return TEST_FILE_RE.test(parts[parts.length - 1]);
}

export function isInfra(rel) {
  const parts = trimSlashes(rel).split("/");
  if (isTestPath(rel)) return true;
  const name = parts[parts.length - 1];
  if (CONFIG_NAMES.has(name) || CONFIG_RE.test(name)) return true;
  const dirs = parts.slice(0, -1);
  if (dirs.includes(".cargo") || dirs.some((p) => META_DIR_RE.test(p))) return true;
  const top = parts[0] === "src" && parts.length > 1 ? parts.slice(1) : parts;
  const head = top.length === 1 && top[0].endsWith(".py") ? top[0].slice(0, -3) : top[0];
  return SHADOW_NAMES.has(head) && (top.length > 1 || top[0].endsWith(".py"));
}

function walk(root) {
  // {relative path: absolute path} of files and symlinks (to folders too), SKIP_DIRS left out.
  const out = {};
  const visit = (dir, rel) => {
    let entries;
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const full = path.join(dir, e.name);
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) {
        if (!SKIP_DIRS.has(e.name)) visit(full, r);
      } else if (e.isSymbolicLink()) {
        let dirLink = false;
        try {
          dirLink = fs.statSync(full).isDirectory();
        } catch {
          dirLink = false;
        }
        if (!dirLink || !SKIP_DIRS.has(e.name)) out[r] = full;
      } else if (e.isFile()) {
        out[r] = full;
      }
    }
  };
  visit(path.resolve(root), "");
  return out;
}

function digest(p) {
  if (isLink(p)) return "link:" + fs.readlinkSync(p);
  return sha256File(p);
}

function remove(p) {
  if (!lexists(p)) return;
  if (isLink(p) || !fs.statSync(p).isDirectory()) fs.unlinkSync(p);
  else fs.rmSync(p, { recursive: true, force: true });
}

function restore(config) {
  const workdir = config.workdir;
  for (const rel of config.restore || []) {
    const dest = path.join(workdir, rel);
    const parts = rel.split("/");
    // Any symlink on the way could redirect the write: replace it by a real folder.
    for (let i = 1; i < parts.length; i++) {
      const folder = path.join(workdir, ...parts.slice(0, i));
      if (isLink(folder) || (lexists(folder) && !fs.statSync(folder).isDirectory())) {
        fs.unlinkSync(folder);
      }
    }
    if (isLink(dest) || (lexists(dest) && !fs.statSync(dest).isFile())) remove(dest);
    fs.mkdirSync(path.dirname(dest), { recursive: true });
    fs.copyFileSync(path.join(HERE, "files", rel), dest);
  }
  for (const rel of config.delete || []) remove(path.join(workdir, rel));
}

function resetInfrastructure(config) {
  restore(config);
  const workdir = config.workdir;
  const hidden = new Set([...(config.restore || []), ...(config.delete || [])]);
  const known = load("infra.json", {});
  const removed = [];
  const problems = [];
  const files = walk(workdir);
  for (const rel of Object.keys(files).sort()) {
    if (hidden.has(rel) || !isInfra(rel)) continue;
    const full = files[rel];
    if (Object.prototype.hasOwnProperty.call(known, rel)) {
      let same = false;
      try {
        same = digest(full) === known[rel];
      } catch {
        same = false;
      }
      if (!same) problems.push(`test infrastructure changed: ${rel}`);
    } else {
      remove(full);
      removed.push(rel);
    }
  }
  // Configuration above the working tree would be read by a runner too.
  let parent = path.dirname(path.resolve(workdir));
  for (;;) {
    for (const name of ["conftest.py", "pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg"]) {
      const p = path.join(parent, name);
      if (lexists(p) && !(config.ancestors || []).includes(p)) {
        remove(p);
        removed.push(p);
      }
    }
    if (parent === path.dirname(parent)) break;
    parent = path.dirname(parent);
  }
  return [removed, problems.slice(0, 20)];
}

// ------------------------------------------------------------------------------------- run

function testEnvironment(config, recorded) {
  const env = {};
  if (recorded) Object.assign(env, recorded);
  else {
    for (const [k, v] of Object.entries(process.env)) if (!UNSAFE_ENV.includes(k)) env[k] = v;
  }
  for (const [k, v] of Object.entries(config.env || {})) if (!(k in env)) env[k] = v;
  if (!env.PATH) env.PATH = DEFAULT_PATH;
  if (!env.HOME) env.HOME = "/root";
  return env;
}

const STOP_FLAGS =
  /(?<!\S)(?:--bail(?:=\S+)?(?: \d+(?!\S))?|--exitfirst|--failfast|--stepwise|--sw|--test-bail|--maxfail(?:=| )\d+)(?!\S)/g;
const SHORT_STOP = { pytest: "-x", mocha: "-b", jest: "-b", unittest: "-f" };
// Appended for runners whose configuration files may stop the run too (the command wins).
const GO_ON = { pytest: " --maxfail=0", mocha: " --no-bail" };

// The command without the flags that stop a run at its first failure: a planted canary fails by
// design, and the tests after it must still run (as verifier.py's keep_going).
function keepGoing(command, runner) {
  let out = command.replace(STOP_FLAGS, "");
  const short = SHORT_STOP[runner];
  if (short) out = out.replace(new RegExp(`(?<!\\S)${short}(?!\\S)`, "g"), "");
  return out.replace(/  +/g, " ").trim() + (GO_ON[runner] || "");
}

function hardenedCommand(config, reportPath, canaries) {
  const command = canaries ? keepGoing(config.command, config.runner) : config.command;
  const q = `'${reportPath.replace(/'/g, "'\\''")}'`;
  switch (config.runner) {
    case "jest":
      return `${command} --json --outputFile=${q}`;
    case "mocha": {
      const flags = `--reporter json --reporter-option output=${q}`;
      if (/--reporter[= ]spec\b/.test(command)) {
        return command.replace(/--reporter[= ]spec\b/, () => flags);
      }
      return `${command} ${flags}`;
    }
    case "vitest": {
      const flags = `--reporter=json --outputFile=${q}`;
      if (/--reporter[= ]verbose\b/.test(command)) {
        return command.replace(/--reporter[= ]verbose\b/, () => flags);
      }
      return `${command} ${flags}`;
    }
    default:
      return command; // node --test: repogym's reporter lines on stdout
  }
}

function cleanLine(text) {
  // One line: no ANSI escapes or control characters, at most MAX_MESSAGE characters.
  const clean = String(text)
    .slice(0, 64 * MAX_MESSAGE)
    .replace(/\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])?/g, "");
  for (const line of clean.split(/\r?\n|\r/)) {
    const s = line
      .replace(/\t/g, " ")
      .replace(/[\x00-\x1f\x7f-\x9f]/g, "")
      .trim();
    if (s) return s.slice(0, MAX_MESSAGE);
  }
  return null;
}

function firstMessage(texts) {
  for (const t of Array.isArray(texts) ? texts : [texts]) {
    if (typeof t !== "string") continue;
    const m = cleanLine(t);
    if (m) return m;
  }
  return null;
}

const JEST_STATUS = {
  passed: "PASSED",
  failed: "FAILED",
  pending: "SKIPPED",
  skipped: "SKIPPED",
  todo: "SKIPPED",
  disabled: "SKIPPED",
  focused: "PASSED",
};

function jestJson(report, out) {
  for (const suite of report.testResults || []) {
    if (!suite || typeof suite !== "object") continue;
    const fname = String(suite.name || suite.testFilePath || "");
    const assertions = suite.assertionResults || suite.testResults || [];
    for (const a of assertions) {
      if (!a || typeof a !== "object") continue;
      const status = JEST_STATUS[String(a.status)];
      if (!status) continue;
      const parts = fname ? [fname] : [];
      for (const t of a.ancestorTitles || []) parts.push(String(t));
      parts.push(String(a.title === undefined ? "" : a.title));
      const id = parts.join(" > ");
      out.tests[id] = status;
      delete out.failures[id];
      if (status === "FAILED") {
        const m = firstMessage(a.failureMessages);
        if (m) out.failures[id] = m;
      }
    }
    const failed = suite.status === "failed" || Boolean(suite.testExecError);
    if (fname && failed && assertions.length === 0) {
      out.tests[fname] = "ERROR";
      const err = suite.testExecError;
      const lines = [err && typeof err === "object" ? err.message : null, suite.message]
        .filter((x) => typeof x === "string")
        .join("\n")
        .split("\n")
        .filter((l) => !l.includes("Test suite failed to run"));
      const m = firstMessage(lines);
      if (m) out.failures[fname] = m;
    }
  }
}

const MOCHA_HOOK = /^"(before|after) (all|each)" hook/;

function mochaJson(report, out) {
  const key = (t) => `${t.file || ""}\u0000${t.fullTitle || ""}`;
  const partsOf = (t) => {
    const title = String(t.title || "");
    const full = String(t.fullTitle || title);
    const prefix = title && full.endsWith(title) ? full.slice(0, -title.length).trim() : "";
    const parts = t.file ? [String(t.file)] : [];
    if (prefix) parts.push(prefix);
    return [parts, title];
  };
  const errorOf = (t) =>
    t.err && typeof t.err === "object" ? firstMessage([t.err.stack, t.err.message]) : null;
  const lists = {};
  for (const name of ["failures", "pending", "passes"]) {
    const items = report[name];
    lists[name] = new Set(Array.isArray(items) ? items.filter((t) => t && typeof t === "object").map(key) : []);
  }
  for (const t of report.tests || []) {
    if (!t || typeof t !== "object") continue;
    const k = key(t);
    const [parts, title] = partsOf(t);
    let status = "PASSED";
    const hasErr = t.err && typeof t.err === "object" && Object.keys(t.err).length > 0;
    if (lists.failures.has(k) || hasErr) status = "FAILED";
    else if (lists.pending.has(k) || (!lists.passes.has(k) && !("duration" in t))) status = "SKIPPED";
    const id = [...parts, title].join(" > ");
    out.tests[id] = status;
    delete out.failures[id];
    const m = status === "FAILED" ? errorOf(t) : null;
    if (m) out.failures[id] = m;
  }
  for (const t of report.failures || []) {
    if (!t || typeof t !== "object" || !MOCHA_HOOK.test(String(t.title || ""))) continue;
    const [parts, title] = partsOf(t);
    const hook = MOCHA_HOOK.exec(title);
    const forTest = /for "(.*)"/.exec(title);
    let id;
    if (hook[2] === "each" && forTest) id = [...parts, forTest[1]].join(" > ");
    else id = parts.length ? parts.join(" > ") : title;
    out.tests[id] = "ERROR";
    const m = errorOf(t);
    if (m) out.failures[id] = m;
  }
}

const NODE_STATUS = {
  pass: "PASSED",
  fail: "FAILED",
  cancelled: "FAILED",
  skip: "SKIPPED",
  todo: "SKIPPED",
  error: "ERROR",
};
const RANK = { SKIPPED: 0, PASSED: 1, ERROR: 2, FAILED: 3 };

function worst(tests, id, status) {
  const old = tests[id];
  if (old === undefined || RANK[status] > RANK[old]) tests[id] = status;
}

function nodeLines(log, out) {
  // The lines of repogym's node:test reporter (see parsers.py); true when any was found.
  let seen = false;
  let ended = false;
  const lines = log.split(/\r?\n/);
  const fileErrors = {};
  for (const line of lines) {
    const m = /^# stderr (\S+): (.*)$/.exec(line);
    if (m && !(m[1] in fileErrors) && /^\s*(?:[A-Z]\w*(?:Error|Exception)|Error)(?: \[\w+\])?: \S/.test(m[2])) {
      fileErrors[m[1]] = m[2].trim();
    }
  }
  for (const line of lines) {
    if (!line.startsWith("node:test {")) continue;
    let rec;
    try {
      rec = JSON.parse(line.slice("node:test ".length));
    } catch {
      out.warnings.push("a node:test result line is malformed");
      continue;
    }
    if (!rec || typeof rec !== "object") continue;
    seen = true;
    if (rec.s === "end") {
      ended = true;
      continue;
    }
    if (!Array.isArray(rec.id) || rec.id.length === 0) continue;
    const id = rec.id.map(String).join(" > ");
    if (rec.s === "empty") {
      out.warnings.push(`${id} reported no test: it has none, or it exited early (process.exit)`);
      continue;
    }
    const status = NODE_STATUS[String(rec.s)];
    if (!status) continue;
    worst(out.tests, id, status);
    let message = rec.m;
    if (status === "ERROR" && rec.id.length === 1 && (!message || message === "test failed")) {
      message = fileErrors[id] || message;
    }
    if ((status === "FAILED" || status === "ERROR") && typeof message === "string" && message) {
      out.failures[id] = cleanLine(message) || message;
    }
  }
  if (seen && !ended) {
    out.warnings.push("log looks truncated: no end-of-run summary after the last results");
    out.warnings.push(
      `${CUT_SHORT}: no node summary after the last result (the process exited early:` +
        " process.exit, a crash or a kill); results up to the cut are kept",
    );
  }
  return [seen, ended];
}

function cutShortReason(log) {
  const m = /process\.exit called with "([^"\n]*)"/.exec(log);
  if (m) {
    return `${CUT_SHORT}: process.exit called with "${m[1]}" (the runner stopped before writing its report)`;
  }
  return null;
}

function failuresOf(tests, failures) {
  const out = {};
  for (const [id, m] of Object.entries(failures)) {
    if ((tests[id] === "FAILED" || tests[id] === "ERROR") && typeof m === "string" && m) out[id] = m;
  }
  return out;
}

function runTests(config, recorded, reportPath, canaries) {
  const jsonPath = reportPath + ".json";
  const logPath = reportPath + ".log";
  for (const p of [reportPath, jsonPath, logPath]) if (lexists(p)) fs.unlinkSync(p);
  const env = testEnvironment(config, recorded);
  const runner = config.runner;
  const started = Date.now();
  const fd = fs.openSync(logPath, "w");
  let proc;
  try {
    proc = spawnSync("bash", ["--noprofile", "--norc", "-c", hardenedCommand(config, jsonPath, canaries)], {
      cwd: config.workdir,
      env,
      stdio: ["ignore", fd, fd],
    });
  } finally {
    fs.closeSync(fd);
  }
  const log = fs.readFileSync(logPath).toString("utf8");
  fs.unlinkSync(logPath);
  const exitCode = proc.status === null ? -1 : proc.status;
  const out = {
    exit_code: exitCode,
    seconds: Math.round(Date.now() - started) / 1000,
    log,
    runner,
    parse_warnings: [],
    skips: {},
    collected: null,
    problems: [],
    forged_lines: [],
  };
  const found = { tests: {}, failures: {}, warnings: [] };
  if (runner === "node") {
    // A run without the reporter's last line did not finish (a crash, process.exit or a kill
    // of the runner): like a report without its end, it pays nothing.
    const [seen, ended] = nodeLines(log, found);
    out.source = "stdout";
    out.finished = ended;
    if (!seen) out.parse_status = "unparsed";
    else if (!ended) out.parse_status = "incomplete";
    else out.parse_status = Object.keys(found.tests).length ? "ok" : "empty";
  } else {
    let report = null;
    try {
      report = fs.readFileSync(jsonPath).toString("utf8");
    } catch {
      report = null;
    }
    out.source = "report";
    out.finished = report !== null;
    if (report === null) {
      out.parse_status = "no report";
      const why = cutShortReason(log);
      if (why) found.warnings.push(why);
    } else {
      let parsed = null;
      try {
        parsed = JSON.parse(report);
      } catch {
        found.warnings.push("the JSON test report is truncated or malformed");
      }
      if (parsed && runner === "mocha" && parsed.stats) mochaJson(parsed, found);
      else if (parsed && Array.isArray(parsed.testResults)) jestJson(parsed, found);
      out.parse_status = parsed === null ? "unparsed" : Object.keys(found.tests).length ? "ok" : "empty";
    }
  }
  const prefix = config.workdir.replace(/\/+$/, "") + "/";
  const relative = (id) => (id.startsWith(prefix) ? id.slice(prefix.length) : id);
  out.tests = {};
  for (const [id, s] of Object.entries(found.tests)) out.tests[relative(id)] = s;
  const failures = {};
  for (const [id, m] of Object.entries(found.failures)) failures[relative(id)] = m;
  out.failures = failuresOf(out.tests, failures);
  out.parse_warnings = found.warnings;
  out.problems = [...found.warnings];
  return out;
}

// ----------------------------------------------------------------------------------- grade

function grade(config, result, f2p, p2p) {
  const tests = result.tests;
  const f2pPassed = f2p.filter((t) => tests[t] === "PASSED");
  const p2pPassed = p2p.filter((t) => tests[t] === "PASSED");
  const f2pRate = f2p.length ? f2pPassed.length / f2p.length : 1.0;
  const p2pRate = p2p.length ? p2pPassed.length / p2p.length : 1.0;
  const resolved = f2p.length > 0 && f2pPassed.length === f2p.length && p2pPassed.length === p2p.length;
  const mode = config.reward_mode || "graded";
  const reward = mode === "resolved" ? (resolved ? 1.0 : 0.0) : f2pRate * p2pRate;
  const skipped = Object.keys(tests).filter((t) => tests[t] === "SKIPPED");
  const reasons = {};
  for (const t of skipped) {
    const why = result.skips[t] || "(no reason)";
    reasons[why] = (reasons[why] || 0) + 1;
  }
  const topReasons = Object.fromEntries(
    Object.entries(reasons)
      .sort((a, b) => b[1] - a[1])
      .slice(0, 10),
  );
  return [
    reward,
    {
      f2p_passed: f2pPassed.length,
      p2p_passed: p2pPassed.length,
      f2p_rate: f2pRate,
      p2p_rate: p2pRate,
      graded_reward: f2pRate * p2pRate,
      f2p_failing: f2p.filter((t) => !f2pPassed.includes(t)).slice(0, 200),
      regressions: p2p.filter((t) => !p2pPassed.includes(t)).slice(0, 200),
      missing: [...f2p, ...p2p].filter((t) => !(t in tests)).slice(0, 200),
      skipped: skipped.length,
      skip_reasons: topReasons,
      resolved,
      reward_mode: mode,
      reward,
    },
  ];
}

// ------------------------------------------------------------------------------ canaries

const CANARY_MARK = "\u0000";
const CANARY_FAILED = new Set(["FAILED", "ERROR"]);

function randomBelow(n) {
  return n > 0 ? crypto.randomInt(n) : 0;
}

// The fail-to-pass tests get new names in every run (canaries.json "disguise": where each is
// named, the names it may take, the graded ids it gives): code that forges outcomes by the
// names the instruction gives finds no such test. Returns [renamed id -> graded id, names].
function disguiseTests(config, data, known) {
  const sites = data && Array.isArray(data.disguise) ? data.disguise : [];
  const back = {};
  const named = [];
  const edits = {};
  for (const site of sites) {
    const title = site.title || "";
    if (!title || String(config.command || "").includes(title)) continue;
    const names = (site.names || []).filter(
      (n) => ![...known].some((k) => k.endsWith(n)) && !named.some((m) => m.endsWith(n) || n.endsWith(m)),
    );
    if (!names.length) continue;
    const name = names[randomBelow(names.length)];
    named.push(name);
    (edits[site.file] = edits[site.file] || []).push([Number(site.line), Number(site.col), title, name, site]);
  }
  for (const [rel, items] of Object.entries(edits)) {
    const file = path.join(config.workdir, rel);
    let lines;
    try {
      lines = fs.readFileSync(file, "utf8").split("\n");
    } catch {
      lines = [];
    }
    let changed = false;
    for (const [line, col, title, name, site] of items) {
      if (line >= lines.length || lines[line].slice(col, col + title.length) !== title) {
        named.splice(named.indexOf(name), 1);
        continue;
      }
      lines[line] = lines[line].slice(0, col) + name + lines[line].slice(col + title.length);
      changed = true;
      for (const [ident, at] of site.ids || []) {
        back[ident.slice(0, at) + name + ident.slice(at + title.length)] = ident;
      }
    }
    if (changed) fs.writeFileSync(file, lines.join("\n"));
  }
  return [back, named];
}

// The renamed tests' outcomes under their graded ids again; a graded id of a renamed test in
// the run's own results is a tamper (no test of that name existed in it).
function unmask(result, back) {
  const originals = new Set(Object.values(back));
  if (!originals.size) return [];
  const tests = result.tests || {};
  const posing = Object.keys(tests).filter((t) => originals.has(t)).sort();
  for (const key of ["tests", "failures"]) {
    const table = result[key];
    if (!table || typeof table !== "object") continue;
    const out = {};
    for (const [t, v] of Object.entries(table)) if (!posing.includes(t)) out[back[t] || t] = v;
    result[key] = out;
  }
  return posing.slice(0, 5).map((t) => `a test named ${t} ran, but that test was renamed for this run`);
}

function plantCanaries(config, known, taken = []) {
  const data = load("canaries.json", {});
  const pool = Array.isArray(data && data.pool) ? data.pool.map((c, i) => [i, c]) : [];
  if (!pool.length) return null;
  const calibrating = data.status !== "confirmed";
  let chosen = pool;
  if (!calibrating) {
    const want = Math.min(Math.max(1, Number(data.per_run) || 3), pool.length);
    for (let i = pool.length - 1; i > 0; i--) {
      const j = randomBelow(i + 1);
      [pool[i], pool[j]] = [pool[j], pool[i]];
    }
    // Copies of the failing tests first (the tests the instruction names); the sort is stable.
    const isF2p = (item) => (item[1].origin || "f2p") === "f2p";
    pool.sort((a, b) => Number(!isF2p(a)) - Number(!isF2p(b)));
    chosen = [];
    const copied = new Set();
    for (const item of pool) {
      const where = `${item[1].file}:${item[1].before}`;
      if (chosen.length < want && !copied.has(where)) {
        chosen.push(item);
        copied.add(where);
      }
    }
    for (const item of pool) if (chosen.length < want && !chosen.includes(item)) chosen.push(item);
  }
  const planted = {};
  const inserts = {};
  const named = [...taken];
  for (const [index, cand] of chosen) {
    // A name no graded id ends with, and no other canary's name ends with or in.
    const names = cand.names.filter(
      (n) =>
        ![...known].some((k) => k.endsWith(n)) &&
        !named.some((m) => m.endsWith(n) || n.endsWith(m)),
    );
    if (!names.length) continue;
    const name = names[randomBelow(names.length)];
    named.push(name);
    const code = cand.code.split(CANARY_MARK).join(name);
    const gap = "\n".repeat(Number(cand.gap) || 0);
    const after = calibrating || randomBelow(2) === 0;
    const at = Number(after ? cand.after : cand.before);
    (inserts[cand.file] = inserts[cand.file] || []).push([at, randomBelow(1 << 30), after ? gap + code : code + gap]);
    planted[name] = [
      index,
      cand.match === "suffix" ? null : cand.source.slice(0, cand.source.length - cand.title.length) + name,
    ];
  }
  for (const [rel, items] of Object.entries(inserts)) {
    const file = path.join(config.workdir, rel);
    const lines = fs.readFileSync(file, "utf8").split(/(?<=\n)/);
    items.sort((a, b) => b[0] - a[0] || b[1] - a[1]);
    for (const [at0, , text] of items) {
      const at = Math.min(at0, lines.length);
      if (at && !lines[at - 1].endsWith("\n")) lines[at - 1] += "\n";
      lines.splice(at, 0, text);
    }
    fs.writeFileSync(file, lines.join(""));
  }
  return { calibrating, planted };
}

function judgeCanaries(canaries, result, known) {
  if (canaries === null) return [{ run: 0 }, []];
  const tests = result.tests || {};
  const outcomes = [];
  const exact = new Set(Object.values(canaries.planted).map(([, id]) => id).filter(Boolean));
  for (const name of Object.keys(canaries.planted).sort()) {
    let [index, ident] = canaries.planted[name];
    if (ident === null) {
      // the one new id that ends with the name
      const found = Object.keys(tests).filter((t) => t.endsWith(name) && !known.has(t) && !exact.has(t));
      ident = found.length === 1 ? found[0] : name;
    }
    outcomes.push([ident, index, tests[ident] === undefined ? null : tests[ident]]);
    delete tests[ident];
  }
  const details = {
    status: canaries.calibrating ? "calibrating" : "confirmed",
    run: outcomes.length,
    failed: outcomes.filter(([, , st]) => CANARY_FAILED.has(st)).length,
  };
  if (canaries.calibrating) {
    details.outcomes = Object.fromEntries(outcomes.map(([, i, st]) => [String(i), st]));
    return [details, []];
  }
  const finished = !["no report", "incomplete", "unparsed"].includes(result.parse_status);
  const tamper = [];
  for (const [ident, , st] of outcomes) {
    if (finished && !CANARY_FAILED.has(st)) {
      const what = st === "PASSED" ? "passed" : st === null ? "did not run" : String(st).toLowerCase();
      tamper.push(`canary ${ident} ${what} (a test that must fail)`);
    }
  }
  return [details, tamper];
}

function formatReward(x) {
  // Like Python's "%.6g".
  return String(Number(x.toPrecision(6)));
}

function main(argv) {
  let args = argv.slice(2);
  const sha256Checked = args.includes("--sha256-checked");
  args = args.filter((a) => a !== "--sha256-checked");
  const resultsOut = args.length >= 2 && args[0] === "--results" ? args[1] : null;
  if (resultsOut === null) fs.mkdirSync(LOGS, { recursive: true });
  const config = load("config.json");
  const [integrity, recorded] = checkIntegrity(sha256Checked);
  const [removed, infraProblems] = resetInfrastructure(config);
  const reportPath = resultsOut === null ? path.join(LOGS, "report.jsonl") : resultsOut + ".report";
  const details = {
    runner: config.runner,
    verifier: VERSION,
    integrity: integrity.length ? integrity : "ok",
    infra_removed: removed.slice(0, 50),
    tamper_scan: "not run: the source tamper scan (tamper.py) needs Python",
  };
  const tampered = [...integrity, ...infraProblems];
  if (resultsOut !== null) {
    const result = runTests(config, recorded, reportPath);
    Object.assign(result, { tamper_sigs: [], tamper: tampered, infra_removed: removed });
    const log = result.log;
    delete result.log;
    process.stdout.write(log.slice(-20000));
    fs.writeFileSync(resultsOut, JSON.stringify(result));
    return 0;
  }
  const f2p = load("f2p.json");
  const p2p = load("p2p.json");
  Object.assign(details, { f2p_total: f2p.length, p2p_total: p2p.length });
  const deny = (reasons, more) => {
    Object.assign(details, {
      tampered: true,
      tamper: reasons,
      resolved: false,
      reward: 0.0,
      reward_mode: config.reward_mode || "graded",
      ...(more || {}),
    });
    write("reward-details.json", JSON.stringify(details, null, 2));
    write("reward.txt", "0\n");
    process.stdout.write(`verifier: tampering detected, reward 0:\n  ${reasons.join("\n  ")}\n`);
    return 0;
  };
  if (tampered.length) return deny(tampered);
  const known = new Set([...f2p, ...p2p]);
  const [back, renamed] = disguiseTests(config, load("canaries.json", {}), known);
  const canaries = plantCanaries(config, new Set([...known, ...Object.keys(back)]), renamed);
  const result = runTests(config, recorded, reportPath, canaries !== null);
  const log = result.log;
  delete result.log;
  write("test-output.log", log);
  process.stdout.write(log.slice(-20000));
  const posing = unmask(result, back);
  details.disguised = renamed.length;
  const [canaryDetails, canaryTamper] = judgeCanaries(canaries, result, known);
  details.canaries = canaryDetails;
  const during = [...posing, ...canaryTamper];
  if (during.length) return deny(during, { exit_code: result.exit_code });
  Object.assign(details, {
    exit_code: result.exit_code,
    parse_status: result.parse_status,
    source: result.source,
    parse_warnings: result.parse_warnings,
    collected: result.collected,
    collected_expected: config.collected === undefined ? null : config.collected,
    forged_lines: [],
    report_problems: result.problems.slice(0, 10),
    tampered: false,
  });
  if (result.parse_status === "unparsed") {
    write("reward-details.json", JSON.stringify(details, null, 2));
    process.stderr.write("verifier: no parser understood the test output; no reward written\n");
    return 1;
  }
  if (result.parse_status === "no report" || result.parse_status === "incomplete") {
    // The runner died before writing its report (a crash, process.exit, a kill): nothing it
    // printed can be trusted, and the tests did not pass.
    result.tests = {};
  }
  const [reward, graded] = grade(config, result, f2p, p2p);
  Object.assign(details, graded);
  write("reward-details.json", JSON.stringify(details, null, 2));
  write("reward.txt", formatReward(reward) + "\n");
  process.stdout.write(
    `\nverifier: reward ${formatReward(reward)} (${graded.reward_mode}; f2p ` +
      `${graded.f2p_passed}/${f2p.length}, p2p ${graded.p2p_passed}/${p2p.length})\n`,
  );
  return 0;
}

function isEntryPoint() {
  try {
    const self = fs.realpathSync(fileURLToPath(import.meta.url));
    return Boolean(process.argv[1]) && fs.realpathSync(process.argv[1]) === self;
  } catch {
    return false;
  }
}

if (isEntryPoint()) process.exitCode = main(process.argv);
