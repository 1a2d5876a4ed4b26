def f(xs: list[int]) -> int:
    a, b = xs
    return a
# error: 2:12 same number of targets and values
