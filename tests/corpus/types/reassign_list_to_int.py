def f(xs: list[int]) -> int:
    xs = 0
    return xs
# error: 2:10 type mismatch
