# 'xs[i] += e' evaluates xs and i once, then e.
def note(log: list[int], v: int) -> int:
    log.append(v)
    return v

def once() -> list[int]:
    log = [100, 200]
    log[note(log, 0)] += note(log, 5)
    return log

def all_ops(i: int) -> list[int]:
    xs = [10, 10, 10, 10, 10]
    xs[i] += 3
    xs[i + 1] -= 3
    xs[i + 2] *= -3
    xs[i + 3] //= -3
    xs[i + 4] %= -3
    return xs

def counts(xs: list[int]) -> list[int]:
    c = [0] * 4
    for x in xs:
        c[x % 4] += 1
    return c

# call: once() -> [105, 200, 0, 5]
# call: all_ops(0) -> [13, 7, -30, -4, -2]
# call: all_ops(-5) -> [13, 7, -30, -4, -2]
# call: counts([1, 5, -1, 8, 3]) -> [1, 2, 0, 2]
