def f(a: int) -> int:
    return abs(a, a)
# error: 2:19 wrong number of arguments
