#!/usr/bin/env bash
# Thin entry point: score the edits in the working directory against the gold diff. Isolated
# (-I -S): no site packages, no .pth files, no sitecustomize/usercustomize, no PYTHON* variables,
# so nothing the agent left behind runs before the verifier.
exec python3 -I -S /tests/verifier.py
