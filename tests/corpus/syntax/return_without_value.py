def f(x: int) -> int:
    return
# error: 2:5 'return' needs a value of type int
