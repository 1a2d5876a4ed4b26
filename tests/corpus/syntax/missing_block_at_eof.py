def f() -> int:
    return 0

def g() -> int:
# error: 5:41 expected an indented block
