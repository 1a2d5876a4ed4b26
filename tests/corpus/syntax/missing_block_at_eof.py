def f() -> int:
    return 0

def g() -> int:
# error: 6:1 expected an indented block
