"""What the pipelines mine from a repository's history and from advisories.

* :mod:`.candidates`: the cheap checks that turn a commit or a merged pull request into a
  runtime candidate (tests and source both changed, not too large);
* :mod:`.prs`: the merged pull requests both PR pipelines walk (hosting API or local clone);
* :mod:`.osv`: OSV advisories (local exports, the query API) and what ``cve_patches`` reads
  from a record.

The rooms of ``repogym.pipelines`` are private subpackages: only ``repogym.pipelines`` imports
them, and the modules inside have plain names (the room's leading underscore already marks them
internal).
"""
