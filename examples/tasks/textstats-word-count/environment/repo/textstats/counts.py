def word_count(text):
    """Number of words in ``text``; words are separated by whitespace."""
    if not text:
        return 0
    return len(text.split(" "))


def char_count(text, ignore_spaces=False):
    """Number of characters, optionally not counting spaces."""
    if ignore_spaces:
        return len(text.replace(" ", ""))
    return len(text)


def line_count(text):
    """Number of lines; a trailing newline does not start a new line."""
    return len(text.splitlines())
