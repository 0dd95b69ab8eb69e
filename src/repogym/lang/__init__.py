"""What repogym knows about each language: which files are tests (:mod:`.testfiles`), how
JavaScript is tokenised (:mod:`.js_lex`), ….

The lowest package: standard library only, importing no other repogym package, so that
``sources``, ``verify``, ``bootstrap`` and ``pipelines`` all read the same facts from one place.
Both modules also ship into generated tasks (beside the verifier) and run there under the
repository's own Python.
"""
