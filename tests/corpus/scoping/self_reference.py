def f() -> int:
    x = x + 1
    return x
# error: 2:9 undefined name
