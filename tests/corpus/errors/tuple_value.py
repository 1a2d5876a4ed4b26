def f() -> int:
    x = 1, 2
    return 0
# error: 2:10 tuples are only supported
