def f(a: int, a: int) -> int:
    return a
# error: 1:15 duplicate parameter
