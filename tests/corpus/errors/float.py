def f() -> int:
    x = 1.5
    return 0
# error: 2:9 floats are not supported
