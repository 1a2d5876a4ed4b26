def f() -> int:
    return 0x10
# error: 2:12 invalid number literal
