def f(x: int) -> int:
    y = None
    return x
# error: 2:9 this keyword is not supported
