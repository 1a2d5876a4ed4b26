def f(x: int) -> bool:
    return x is 1
# error: 2:14 this keyword is not supported
