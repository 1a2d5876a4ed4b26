def f(xs: list[int], ys: list[int]) -> bool:
    return xs == ys
# error: 2:15 unsupported operand type
