def f(a: int) -> int:
    return g(a)
# error: 2:12 unknown function
