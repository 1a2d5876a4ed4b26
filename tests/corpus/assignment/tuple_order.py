# All values are evaluated left to right, then assigned to the targets left to right.
def note(log: list[int], v: int) -> int:
    log.append(v)
    return v

def order() -> list[int]:
    log = []
    xs = [0, 0, 0, 0, 0, 0]
    xs[note(log, 1)], xs[note(log, 2)] = note(log, 3), note(log, 4)
    return log + xs

def target_sees_earlier_target() -> list[int]:
    xs = [0, 0, 0]
    i = 0
    i, xs[i] = 2, 7
    return xs

def same_target_twice() -> int:
    a = 0
    a, a = 1, 2
    return a

def declares(n: int) -> int:
    p, q, flag = n, [n, n], n > 0
    if flag:
        return p + len(q)
    return p

def eight(a: int) -> int:
    b, c, d, e, f, g, h, i = a, a + 1, a + 2, a + 3, a + 4, a + 5, a + 6, a + 7
    return b + c + d + e + f + g + h + i

# call: order() -> [3, 4, 1, 2, 0, 3, 4, 0, 0, 0]
# call: target_sees_earlier_target() -> [0, 0, 7]
# call: same_target_twice() -> 2
# call: declares(5) -> 7
# call: declares(-5) -> -5
# call: eight(1) -> 36
