import unittest

from textstats import char_count, line_count, word_count


class CountsTest(unittest.TestCase):
    def test_word_count_simple(self):
        self.assertEqual(word_count("one two three"), 3)

    def test_word_count_irregular_whitespace(self):
        self.assertEqual(word_count("  one   two\tthree\n"), 3)

    def test_word_count_only_spaces(self):
        self.assertEqual(word_count("   "), 0)

    def test_char_count(self):
        self.assertEqual(char_count("a b"), 3)
        self.assertEqual(char_count("a b", ignore_spaces=True), 2)

    def test_line_count(self):
        self.assertEqual(line_count("a\nb\n"), 2)


if __name__ == "__main__":
    unittest.main()
