"""Verification: turning a test run's log into graded test outcomes (see ``parsers``)."""
