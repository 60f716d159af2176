"""The one exception type for bad user input."""


class InputError(ValueError):
    """Input a person typed or chose that a demo cannot use; the message is one plain sentence."""
