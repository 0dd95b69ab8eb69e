"""Python projects: what they declare (pyproject, setup.cfg/py, requirements, tox, nox,
CI), which interpreter and test runner fit, and the recipe (:mod:`.project` reads,
:mod:`.recipe` writes).
"""
