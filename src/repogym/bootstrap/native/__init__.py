"""Compiled-language projects: Rust (:mod:`.rust`, ``cargo test``), Go (:mod:`.go`, ``go test``)
over what they share (:mod:`.project`: host toolchains, registry access), and Java built with
Maven (:mod:`.java`, its POM reading in :mod:`.pom`, ``mvn test`` with Surefire's reports).
"""
