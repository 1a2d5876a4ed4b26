def alias() -> list[int]:
    xs = [1, 2]
    ys = xs
    ys.append(3)
    xs[0] = 10
    return ys

def rebind() -> list[int]:
    xs = [1, 2]
    ys = xs
    xs = [5]
    xs.append(6)
    return ys

def both_views() -> int:
    xs = [1]
    ys = xs
    zs = ys
    zs.pop()
    return len(xs) + len(ys)

# call: alias() -> [10, 2, 3]
# call: rebind() -> [1, 2]
# call: both_views() -> 0
