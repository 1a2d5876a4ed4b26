def f(a: int) -> int:
    return a << 1
# error: 2:14 this operator is not supported
