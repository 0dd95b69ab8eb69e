"""Check /app/greeting.txt and write the reward (standard library only)."""

import json
import pathlib

target = pathlib.Path("/app/greeting.txt")
ok = target.is_file() and target.read_bytes() == b"Hello from repogym\n"
print("greeting.txt:", "correct" if ok else "missing or wrong")
logs = pathlib.Path("/logs/verifier")
(logs / "reward.txt").write_text("1.0\n" if ok else "0.0\n")
(logs / "reward-details.json").write_text(json.dumps({"exists": target.is_file(), "correct": ok}))
