"""Generation on Ray (``generate --executor ray``, campaigns on Ray).

* :mod:`.driver`: the driver's side: candidates into work units, results into the dataset,
  the resume state and the reports;
* :mod:`.worker`: the worker's side: evaluate one candidate over the worker's copy of the
  repository.

The rooms of ``repogym.pipelines`` are private subpackages: only ``repogym.pipelines`` imports
them, and the modules inside have plain names (the room's leading underscore already marks them
internal).
"""
