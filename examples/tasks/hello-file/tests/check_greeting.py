"""Check /app/greeting.txt and write the reward (standard library only).

Whatever the agent left at that path — a link, a folder, a device, a file of gigabytes — the
check ends with a reward written: 1 for exactly the expected line in a regular file, else 0.
"""

import json
import os
import stat

TARGET = "/app/greeting.txt"
EXPECTED = b"Hello from repogym\n"
LOGS = "/logs/verifier"


def check():
    try:
        fd = os.open(TARGET, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        return False, "missing or not a plain file (%s)" % exc.strerror
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return False, "not a regular file"
        if st.st_size != len(EXPECTED):
            return False, "wrong size (%d bytes)" % st.st_size
        return os.read(fd, len(EXPECTED) + 1) == EXPECTED, "compared"
    finally:
        os.close(fd)


def main():
    ok, why = check()
    print("greeting.txt:", "correct" if ok else "missing or wrong (%s)" % why)
    os.makedirs(LOGS, exist_ok=True)
    with open(os.path.join(LOGS, "reward.txt"), "w") as fh:
        fh.write("1.0\n" if ok else "0.0\n")
    with open(os.path.join(LOGS, "reward-details.json"), "w") as fh:
        json.dump({"correct": ok, "why": why}, fh)


if __name__ == "__main__":
    main()
