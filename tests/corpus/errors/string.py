def f() -> int:
    s = "abc"
    return 0
# error: 2:9 strings are not supported
