def f(n: int) -> int:
    y = x + n
    x = 1
    return y
# error: 2:9 undefined name
