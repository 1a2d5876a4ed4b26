def f(x: int, xs: list[int]) -> int:
    return x and xs
# error: 2:14 unsupported operand type
