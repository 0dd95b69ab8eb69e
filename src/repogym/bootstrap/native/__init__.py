"""Compiled-language projects: Rust (:mod:`.rust`, ``cargo test``) and Go (:mod:`.go`,
``go test``), over what they share (:mod:`.project`: host toolchains, registry access).
"""
