def f(xs: list[int]) -> int:
    return xs
# error: 2:12 type mismatch
