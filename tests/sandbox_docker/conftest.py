"""This folder's tests run on a real Docker engine: the session fixture ``engine`` of
``tests/conftest.py`` (see :mod:`tests.engine`), shared with the Harbor tests of
``tests/integrations``."""
