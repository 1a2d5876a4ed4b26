def g(a: int, b: int) -> int:
    return a + b

def f() -> int:
    return g(1)
# error: 5:13 wrong number of arguments
