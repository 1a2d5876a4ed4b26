def f(xs: list[int]) -> int:
    xs.push(1)
    return 0
# error: 2:8 unknown method
