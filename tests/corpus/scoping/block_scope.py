# Assigning a visible variable inside a block updates it; it is not a new variable.
def outer_updated(c: bool) -> int:
    x = 1
    if c:
        x = 2
    return x

def loop_accumulates(n: int) -> int:
    total = 0
    i = 0
    while i < n:
        step = i * 2
        total += step
        i += 1
    return total

def redeclared_each_iteration(n: int) -> list[int]:
    out = []
    for i in range(n):
        fresh = []
        fresh.append(i)
        out += fresh
    return out

# call: outer_updated(True) -> 2
# call: outer_updated(False) -> 1
# call: loop_accumulates(4) -> 12
# call: redeclared_each_iteration(3) -> [0, 1, 2]
