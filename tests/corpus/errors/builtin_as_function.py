def max(a: int, b: int) -> int:
    return a
# error: 1:5 is a builtin name
