"""Which test files a task runs when the whole suite is too slow: the files whose imports reach
the changed source.

* :mod:`.select`: the selection itself (``find_test_files``, ``tests_exercising``);
* :mod:`.repo_index`: the snapshot's file index and path helpers;
* :mod:`.import_scan`: what one source file imports (Python, JavaScript/TypeScript);
* :mod:`.import_resolve`: the repository file an import names (Python roots, Node resolution).

The rooms of ``repogym.pipelines`` are private subpackages: only ``repogym.pipelines`` imports
them, and the modules inside have plain names (the room's leading underscore already marks them
internal).
"""
