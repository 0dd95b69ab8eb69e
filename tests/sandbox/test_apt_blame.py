"""A failed ``apt-get install`` after an earlier ``curl | bash`` added an apt source (the shape
of nodesource's setup script): the build error names that source and the host apt could not
reach, not the base image's mapping onto the host."""

from __future__ import annotations

from pathlib import Path

import pytest

from repogym.sandbox import BuildError, EnvironmentSpec
from repogym.sandbox.local import LocalSandbox
from tests.sandbox.conftest import make_context

# What such a setup script does, served from the context instead of the internet: a
# one-line ``.list`` file, or the deb822 ``.sources`` form newer scripts write.
SETUP = {
    "nodesource.list": """\
#!/bin/bash
set -e
echo "deb [trusted=yes] https://deb.nodesource.example/node_20.x nodistro main" \\
  > /etc/apt/sources.list.d/nodesource.list
""",
    "nodesource.sources": """\
#!/bin/bash
set -e
cat > /etc/apt/sources.list.d/nodesource.sources <<'EOF'
Types: deb
URIs: https://deb.nodesource.example/node_20.x
Suites: nodistro
Components: main
Trusted: yes
EOF
""",
}


def _spec(ctx: Path) -> EnvironmentSpec:
    return EnvironmentSpec(context_dir=ctx, network_mode="no-network")


def _nodesource_context(root: Path, source: str, update: str) -> Path:
    return make_context(
        root,
        "FROM debian:bookworm\n"
        "COPY setup_20.x /tmp/setup_20.x\n"
        "RUN cat /tmp/setup_20.x | bash -\n"
        f"RUN --network=none {update}apt-get install -y nodejs=20.11.0-1nodesource1\n",
        {"setup_20.x": SETUP[source]},
    )


@pytest.mark.parametrize("source", sorted(SETUP))
def test_an_unreachable_source_added_by_an_earlier_step_is_named(
    sandbox: LocalSandbox, tmp_path: Path, source: str
) -> None:
    ctx = _nodesource_context(tmp_path / "ctx", source, "apt-get update; ")
    with pytest.raises(BuildError) as err:
        sandbox.build(_spec(ctx), log=tmp_path / "log")
    msg = str(err.value)
    assert "\n" not in msg, msg
    assert msg.startswith("Dockerfile line 4: apt-get cannot install package 'nodejs'"), msg
    assert "could not reach deb.nodesource.example (Temporary failure resolving" in msg, msg
    assert f"/etc/apt/sources.list.d/{source}" in msg, msg
    assert "mapped onto" not in msg, msg
    assert "deb.debian.org" not in msg, msg  # the base's own sources are not the story


def test_a_source_added_earlier_is_named_even_without_apts_errors(
    sandbox: LocalSandbox, tmp_path: Path
) -> None:
    """No ``apt-get update`` in the failing step: apt printed no fetch error, but the source
    the earlier step added is still where the package was expected to come from."""
    ctx = _nodesource_context(tmp_path / "ctx", "nodesource.list", "")
    with pytest.raises(BuildError) as err:
        sandbox.build(_spec(ctx))
    msg = str(err.value)
    assert "apt sources earlier steps added provide it" in msg, msg
    assert "/etc/apt/sources.list.d/nodesource.list (deb.nodesource.example)" in msg, msg


def test_a_package_the_mapped_base_lacks_is_still_blamed_on_the_mapping(
    sandbox: LocalSandbox, tmp_path: Path
) -> None:
    """No source added by the Dockerfile: the mapping is the likely cause, as before."""
    ctx = make_context(
        tmp_path / "ctx",
        "FROM debian:bookworm\nRUN --network=none apt-get install -y no-such-package-repogym\n",
    )
    with pytest.raises(BuildError) as err:
        sandbox.build(_spec(ctx))
    msg = str(err.value)
    assert "apt-get cannot install package 'no-such-package-repogym'" in msg
    assert "is mapped onto the host" in msg and "sources.list.d" not in msg, msg
