x = 1

def f() -> int:
    return 0
# error: 1:1 only function definitions are allowed at the top level
