def f() -> int:
    len = 3
    return len
# error: 2:5 is a builtin name
