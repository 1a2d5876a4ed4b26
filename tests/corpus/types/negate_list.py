def f(xs: list[int]) -> list[int]:
    return -xs
# error: 2:13 unsupported operand type
