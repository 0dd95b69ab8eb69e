#!/usr/bin/env bash
# Thin entry point: the graded verifier does the work and writes /logs/verifier/reward.txt.
exec python3 /tests/verifier.py
