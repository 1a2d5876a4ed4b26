def f(xs: list[int]) -> int:
    x = xs.append(1)
    return 0
# error: 2:9 returns None
