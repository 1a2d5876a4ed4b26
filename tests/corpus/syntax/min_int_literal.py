def f() -> int:
    return -2147483648
# error: 2:13 does not fit in 32 bits
