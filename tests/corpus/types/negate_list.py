def f(xs: list[int]) -> list[int]:
    return -xs
# error: 2:12 unsupported operand type
