def f(range: int) -> int:
    return 0
# error: 1:7 is a builtin name
