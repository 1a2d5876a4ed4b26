def f(x: int) -> int:
    return
# error: 2:11 expected an expression
