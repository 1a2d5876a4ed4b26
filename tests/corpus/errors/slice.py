def f(xs: list[int]) -> list[int]:
    return xs[1:]
# error: 2:16 slice
