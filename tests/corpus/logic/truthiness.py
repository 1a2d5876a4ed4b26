# Conditions accept any type and use its truth value.
def int_cond(a: int) -> int:
    if a:
        return 1
    return 0

def list_cond(xs: list[int]) -> int:
    if xs:
        return xs[0]
    return -1

def count_down(n: int) -> int:
    steps = 0
    while n:
        n -= 1
        steps += 1
    return steps

def drain(xs: list[int]) -> int:
    s = 0
    while xs:
        s += xs.pop()
    return s

def pick(xs: list[int]) -> int:
    return 10 if xs else 20

# call: int_cond(-1) -> 1
# call: int_cond(0) -> 0
# call: list_cond([0]) -> 0
# call: list_cond([]) -> -1
# call: count_down(7) -> 7
# call: drain([1, 2, 3]) -> 6
# call: pick([]) -> 20
# call: pick([0]) -> 10
