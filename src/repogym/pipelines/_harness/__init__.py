"""Evaluating a candidate and writing its task folder.

* :mod:`.frame`: :class:`~.frame.TaskHarness`, the frame every harness shares (temporary
  folders, drop reasons, instruction rewrite, the verify gate before publishing);
* :mod:`.runtime`: the runtime harness of ``commit_runtime`` and ``pr_runtime`` (build,
  before/after runs through the task's verifier, F2P/P2P);
* :mod:`.verifier_runs`: the sandbox steps the runtime and synthesized-task harnesses share
  (the pinned build, the pristine-session probe, runs through the staged verifier), as plain
  functions;
* :mod:`.diff_task`: the diff-scored, text-only tasks of ``pr_diff`` and ``cve_patches``;
* :mod:`.emit`: writing a runtime task (verifier folder, task folder, shipped templates);
* :mod:`.errors`: unexpected exceptions as bounded drop reasons and the run's error log.

The rooms of ``repogym.pipelines`` are private subpackages: only ``repogym.pipelines`` imports
them, and the modules inside have plain names (the room's leading underscore already marks them
internal).
"""
