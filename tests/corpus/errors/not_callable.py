def f(a: int) -> int:
    return a(1)
# error: 2:12 is not a function
