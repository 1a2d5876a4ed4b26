def f(a: int) -> int:
    return a ** 2
# error: 2:14 this operator is not supported
