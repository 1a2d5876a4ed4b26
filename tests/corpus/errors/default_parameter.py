def f(a: int = 1) -> int:
    return a
# error: 1:14 expected
