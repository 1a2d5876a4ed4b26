def f(x: int) -> int:
    if (y := x):
        return y
    return 0
# error: 2:11 this operator is not supported
