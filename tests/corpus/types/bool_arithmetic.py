def f(b: bool) -> int:
    return b + 1
# error: 2:14 unsupported operand type
