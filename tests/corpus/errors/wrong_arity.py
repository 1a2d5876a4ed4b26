def g(a: int, b: int) -> int:
    return a + b

def f() -> int:
    return g(1)
# error: 5:12 wrong number of arguments
