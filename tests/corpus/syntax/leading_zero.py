def f() -> int:
    return 007
# error: 2:12 invalid number literal
