def f(x: int) -> int:
    g = lambda y: y
    return x
# error: 2:9 this keyword is not supported
