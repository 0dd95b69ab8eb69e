"""Test-log parser speed: time to parse ~10 MB logs of every runner, and of random text.

python benchmarks/parsers.py [--mb 10]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from repogym.shipped.parsers import parse_log  # noqa: E402
from tests.verify.test_parsers_hostile import HUGE, _fill  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=10.0)
    args = ap.parse_args()
    size = int(args.mb * 1_000_000)
    for runner, (make, tail) in sorted(HUGE.items()):
        text = _fill(make, size) + tail
        start = time.perf_counter()
        result = parse_log(text)
        elapsed = time.perf_counter() - start
        print(
            f"{runner:9s} {len(text) / 1e6:5.1f} MB  {len(result.tests):7d} tests  "
            f"{elapsed:6.2f} s  ({len(text) / 1e6 / elapsed:5.1f} MB/s)"
        )
    rng = random.Random(0)
    text = "".join(rng.choice("abc ::[]().-=>✓ \t{}\"'\n") for _ in range(200_000)) * (
        size // 200_000
    )
    start = time.perf_counter()
    status = parse_log(text).status
    print(
        f"random    {len(text) / 1e6:5.1f} MB  {status:>13s}  {time.perf_counter() - start:6.2f} s"
    )


if __name__ == "__main__":
    main()
