"""``repogym.sandbox.ca_bundle.use_ca_bundle``: the public hook behind ``--ca-bundle``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from repogym.sandbox.ca_bundle import ENV_VAR, CaBundleError, use_ca_bundle

PEM = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def test_a_usable_bundle_is_copied_and_offered(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(ENV_VAR, "")  # recorded, so whatever the hook sets is undone after
    monkeypatch.delenv(ENV_VAR)
    given = tmp_path / "corp.pem"
    given.write_bytes(PEM * 2)
    bundle = use_ca_bundle(given, tmp_path / "cache")
    assert bundle.certificates == 2
    assert bundle.copy.parent == tmp_path / "cache" / "ca"
    assert bundle.copy.read_bytes() == PEM * 2
    assert os.environ[ENV_VAR] == str(given.resolve())


@pytest.mark.parametrize("content", [None, b"not a certificate\n"], ids=["missing", "no-pem"])
def test_an_unusable_bundle_is_one_line_and_sets_nothing(
    tmp_path: Path, monkeypatch, content: bytes | None
) -> None:
    monkeypatch.setenv(ENV_VAR, "")  # recorded, so whatever the hook sets is undone after
    monkeypatch.delenv(ENV_VAR)
    given = tmp_path / "corp.pem"
    if content is not None:
        given.write_bytes(content)
    with pytest.raises(CaBundleError) as info:
        use_ca_bundle(given, tmp_path / "cache")
    assert "\n" not in str(info.value) and str(given) in str(info.value)
    assert ENV_VAR not in os.environ
