def f(a: int) -> int:
    return a / 2
# error: 2:14 '/' is not supported
