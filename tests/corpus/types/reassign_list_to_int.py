def f(xs: list[int]) -> int:
    xs = 0
    return xs
# error: 2:5 type mismatch
