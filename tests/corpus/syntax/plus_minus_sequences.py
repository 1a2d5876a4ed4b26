# '++' and '--' are not operators in Python: they are two unary signs.
def f(x: int) -> int:
    return x ++ 1

def g(x: int) -> int:
    return x -- 1

def h(x: int) -> int:
    return x - - - 1

# call: f(1) -> 2
# call: g(1) -> 2
# call: h(1) -> 0
