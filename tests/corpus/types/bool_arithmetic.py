def f(b: bool) -> int:
    return b + 1
# error: 2:12 unsupported operand type
