// The first code of a JavaScript test process (``node --require``, set by the judge through
// NODE_OPTIONS, so every worker a runner starts loads it too). Standard library only.
//
// Before any code of the repository loads, the assertion modules the tests rely on are
// frozen: code under test cannot replace ``assert.strictEqual`` (or any other assertion)
// with one that always passes. An assignment then fails (a TypeError in strict code), so the
// tests that needed the patch fail as they should. ``JSON`` is frozen too: a runner that
// reports from the tests' own process (mocha) serialises its report with it.
"use strict";

Object.freeze(JSON);

for (const name of ["assert", "assert/strict"]) {
  try {
    const mod = require(name);
    for (const value of [mod, mod.strict, mod.AssertionError, mod.AssertionError && mod.AssertionError.prototype]) {
      if (value && (typeof value === "object" || typeof value === "function")) {
        Object.freeze(value);
      }
    }
  } catch (_err) {
    // an old Node without assert/strict: nothing to freeze there
  }
}
