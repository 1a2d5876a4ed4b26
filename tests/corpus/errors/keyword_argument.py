def g(a: int) -> int:
    return a

def f() -> int:
    return g(a=1)
# error: 5:14 keyword arguments are not supported
