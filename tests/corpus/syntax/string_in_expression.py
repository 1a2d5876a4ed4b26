def f(x: int) -> int:
    """A docstring is fine; a string anywhere else is not."""
    y = x + 1
    return "s" if y else x
# error: 4:12 strings are not supported
