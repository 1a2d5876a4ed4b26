def f(x: int, xs: list[int]) -> bool:
    return x in xs
# error: 2:14 not supported
