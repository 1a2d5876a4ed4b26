def f(x: int) -> int:
    global y
    return x
# error: 2:5 this keyword is not supported
