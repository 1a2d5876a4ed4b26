def f() -> int:
    a, b = 1, 2, 3
    return a
# error: 2:5 same number of targets and values
