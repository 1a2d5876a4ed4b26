def f(c: bool) -> int:
    if c:
        y = 1
    return y
# error: 4:12 undefined name
