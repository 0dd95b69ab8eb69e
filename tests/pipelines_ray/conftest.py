"""Generation on Ray and campaigns reuse the git helpers of the source tests (real repos,
isolated git) and the session's local Ray cluster (``ray_cluster``, tests/conftest.py)."""

from tests.sources.conftest import GitRepo, isolated_git

__all__ = ["GitRepo", "isolated_git"]
