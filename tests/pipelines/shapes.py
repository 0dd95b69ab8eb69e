"""The small ``shapes`` Python project the generate tests mine (shared by local and remote tests)."""

PYPROJECT = """\
[project]
name = "shapes"
version = "0.1.0"
requires-python = ">=3.9"
[project.optional-dependencies]
test = ["pytest"]
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"
"""

AREA_V1 = """\
def square(side):
    return side * side


def rectangle(width, height):
    return width + height
"""
