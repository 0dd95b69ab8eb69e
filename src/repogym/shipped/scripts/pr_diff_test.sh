#!/usr/bin/env bash
# Thin entry point: score the edits in the working directory against the gold diff.
exec python3 /tests/verifier.py
