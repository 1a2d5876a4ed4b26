# A name declared in two sibling blocks is two variables; they may have different types.
def siblings(c: bool) -> int:
    if c:
        v = 10
        return v
    else:
        v = [1, 2, 3]
        return len(v)

def loops(n: int) -> int:
    s = 0
    for i in range(n):
        s += i
    for i in range(n):
        s += i
    return s

def sequential_blocks(n: int) -> int:
    r = 0
    if n > 0:
        t = n
        r += t
    if n > 1:
        t = [n]
        r += len(t)
    return r

# call: siblings(True) -> 10
# call: siblings(False) -> 3
# call: loops(4) -> 12
# call: sequential_blocks(5) -> 6
