# 'xs[i] = e' evaluates e first, then xs, then i (Python's order).
def note(log: list[int], v: int) -> int:
    log.append(v)
    return v

def store() -> list[int]:
    log = []
    xs = [0, 0, 0]
    xs[note(log, 1)] = note(log, 2)
    log.append(xs[1])
    return log

def index_sees_value(xs: list[int]) -> list[int]:
    xs[xs.pop() - 1] = len(xs)
    return xs

def store_neg(i: int) -> list[int]:
    xs = [1, 2, 3]
    xs[i] = xs[i] * 10
    return xs

# call: store() -> [2, 1, 2]
# call: index_sees_value([5, 6, 7, 3]) -> [5, 6, 4]
# call: store_neg(-1) -> [1, 2, 30]
# call: store_neg(0) -> [10, 2, 3]
