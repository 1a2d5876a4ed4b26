def f(b: bool) -> bool:
    return b == 1
# error: 2:14 unsupported operand type
