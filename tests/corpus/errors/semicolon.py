def f() -> int:
    x = 1; y = 2
    return x
# error: 2:10 this construct is not supported
