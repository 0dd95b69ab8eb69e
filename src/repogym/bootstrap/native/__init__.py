"""Compiled-language projects (Rust with ``cargo test``, Go with ``go test``): toolchain on the
host, registry access, recipe.
"""
