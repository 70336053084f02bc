"""Errors shared by every package."""


class UserError(Exception):
    """A problem with the user's input or files.

    The message says what was wrong and what to do; the CLI prints it as one
    line and exits with code 2, without a traceback.
    """
