def g() -> int:
    return 1

def f() -> int:
    g() = 2
    return 0
# error: 5:5 cannot assign
