"""What repogym knows about each language (standard library only; no other repogym package)."""
