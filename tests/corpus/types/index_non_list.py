def f(x: int) -> int:
    return x[0]
# error: 2:13 unsupported operand type
