def f() -> int:
    return 1_000
# error: 2:12 invalid number literal
