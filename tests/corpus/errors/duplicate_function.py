def f() -> int:
    return 0

def f() -> int:
    return 1
# error: 4:5 is already defined
