def f(xs: list[int]) -> int:
    xs.append(xs)
    return 0
# error: 2:15 type mismatch
