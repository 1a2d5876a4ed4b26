def f(a: int) -> int:
    return abs(a, a)
# error: 2:12 wrong number of arguments
