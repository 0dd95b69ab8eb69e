#!/usr/bin/env bash
# Verifier: reward 1 when /app/greeting.txt holds exactly the expected line, else 0. The task
# is verified in the clean room: the agent's files under /app are carried onto a fresh copy of
# the environment, so the interpreter and this script are the environment's own.
mkdir -p /logs/verifier
exec python3 -I -S /tests/check_greeting.py
