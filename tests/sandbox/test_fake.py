"""The fake sandbox's path mapping: a shell parameter's default names a sandbox path too
(``${LOGS:-/logs/verifier}``, as the shipped ``test.sh`` writes it), so a script run on the
host writes inside the session's root, never in the host's folder of that name."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

from repogym.sandbox import EnvironmentSpec
from repogym.sandbox.fake import FakeSandbox, map_paths


def test_a_parameter_default_is_mapped_into_the_root(tmp_path: Path) -> None:
    for name in ("logs", "workspace"):
        (tmp_path / name).mkdir()
    r = str(tmp_path)
    assert map_paths(tmp_path, "L=${X:-/logs/verifier}") == f"L=${{X:-{r}/logs/verifier}}"
    assert map_paths(tmp_path, 'cd "${W:-/workspace}"') == f'cd "${{W:-{r}/workspace}}"'
    assert (
        map_paths(tmp_path, "${X:=/logs} ${Y:+/logs/a}") == f"${{X:={r}/logs}} ${{Y:+{r}/logs/a}}"
    )
    # Still not inside a word or another path, and the host's system folders stay the host's.
    for text in ("a-/logs", "x/logs/y", "~/logs", "${X:-/usr/lib}"):
        assert map_paths(tmp_path, text) == text


def test_a_script_writes_its_default_folder_in_the_root(tmp_path: Path) -> None:
    top = f"fake-map-{uuid.uuid4().hex[:12]}"  # a folder the host surely lacks
    sandbox = FakeSandbox(host=True, root=tmp_path / "fake")
    spec = EnvironmentSpec(context_dir=None, workdir="/work")
    built = sandbox.build(spec)
    try:
        with sandbox.start(built, spec) as session:
            session.write(f"/{top}/.keep", "")
            script = f'OUT=${{OUT_DIR:-/{top}/out}}\nmkdir -p "$OUT"\necho 1 > "$OUT/reward.txt"\n'
            session.write("/work/run.sh", script)
            res = session.exec(["bash", "/work/run.sh"], timeout_s=30)
            assert res.exit_code == 0, res.stderr
            assert session.read(f"/{top}/out/reward.txt") == b"1\n"
            assert not Path(f"/{top}").exists()
    finally:
        shutil.rmtree(f"/{top}", ignore_errors=True)  # only if the mapping failed
        sandbox.close()
