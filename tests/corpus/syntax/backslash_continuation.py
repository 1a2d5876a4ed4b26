def f(x: int) -> int:
    return x + \
        1
# error: 2:16 this construct is not supported
