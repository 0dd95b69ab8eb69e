"""This folder's tests run on a real Docker engine: the session fixture ``engine`` (shared with
``tests/openenv``) is in ``tests/conftest.py``; see :mod:`tests.engine`."""
