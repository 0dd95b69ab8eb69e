#!/usr/bin/env bash
# Verifier: reward 1 when /app/greeting.txt holds exactly the expected line, else 0.
mkdir -p /logs/verifier
python3 /tests/check_greeting.py
