"""Node projects: package manager, Node version, test runner and scripts, test files, and the
recipe (:mod:`.project` reads and writes; the other modules each answer one question for it).
"""
