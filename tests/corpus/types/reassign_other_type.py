def f() -> int:
    x = 1
    x = True
    return x
# error: 3:5 type mismatch
