def g() -> int:
    return 1

def f() -> int:
    g = 2
    return g
# error: 5:5 is a function name
