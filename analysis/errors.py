"""The one exception type that reaches the user as a one-line message (exit code 2)."""


class UsageError(Exception):
    """Bad input or an unusable environment: the message names the problem and the fix."""
