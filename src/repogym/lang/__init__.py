"""What repogym knows about each language: which files are tests (:mod:`.testfiles`), ….

The lowest package: standard library only, importing no other repogym package, so that
``sources``, ``verify``, ``bootstrap`` and ``pipelines`` all read the same facts from one place.
"""
