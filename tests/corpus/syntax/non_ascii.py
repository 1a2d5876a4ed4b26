def f() -> int:
    x = 1  # café
    return x
# error: 2:17 non-ASCII character
