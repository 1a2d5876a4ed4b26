def f() -> int:
    x, = 7  # CPython: TypeError at run time (cannot unpack an int)
    return x
# error: 2:10 same number of targets and values
