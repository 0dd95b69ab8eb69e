"""pr_diff fixtures reuse the git helpers of the source tests (real repos, isolated git)."""

from tests.sources.conftest import GitRepo, isolated_git, make_repo

__all__ = ["GitRepo", "isolated_git", "make_repo"]
