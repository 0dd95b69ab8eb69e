"""Tasks made by editing one revision instead of mining its history.

* :mod:`.harness`: the harness of ``bug_synth`` and ``code_instruct`` (shared build,
  baseline runs, traced calls, one edit per candidate);
* :mod:`.ops`: pure edits of one Python file (function listing, stubs, the call tracer);
* :mod:`.mutants`: the procedural mutants of ``bug_synth``;
* :mod:`.equiv`: the host-side helpers of ``equivalence_tests`` (targets, drawn inputs).

The rooms of ``repogym.pipelines`` are private subpackages: only ``repogym.pipelines`` imports
them, and the modules inside have plain names (the room's leading underscore already marks them
internal).
"""
