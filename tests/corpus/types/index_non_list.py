def f(x: int) -> int:
    return x[0]
# error: 2:12 unsupported operand type
