def f(c: bool) -> int:
    if c:
        y = 1
    else:
        y = 2
    return y
# error: 6:12 undefined name
