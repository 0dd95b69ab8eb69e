"""What the agent is told: a task's instruction and the evidence it states.

* :mod:`.text`: instructions from commit, PR and issue text (cleaning, leak checks,
  :func:`~.text.compose`, the optional LLM rewrite);
* :mod:`.evidence`: the fail-to-pass tests as Markdown sections (names, docstrings, failures);
* :mod:`.interface`: the names hidden tests need that the base snapshot lacks (static analysis);
* :mod:`.advisory`: an advisory's summary and details as task text, without the fix.

The rooms of ``repogym.pipelines`` are private subpackages: only ``repogym.pipelines`` imports
them, and the modules inside have plain names (the room's leading underscore already marks them
internal).
"""
