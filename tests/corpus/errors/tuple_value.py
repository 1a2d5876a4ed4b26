def f() -> int:
    x = 1, 2
    return 0
# error: 2:9 tuples are only supported
