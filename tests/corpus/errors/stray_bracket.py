def f() -> int:
    x = 1, 2]
    return x
# error: 2:13 invalid syntax
