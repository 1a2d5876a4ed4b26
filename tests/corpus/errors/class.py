class A:
    pass

def f() -> int:
    return 0
# error: 1:1 this keyword is not supported
